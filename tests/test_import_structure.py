"""The package's import structure (read from the source, nothing imported): no module takes part
in an import circle (a lazy import inside a function counts; one under `if TYPE_CHECKING:` does
not), experiments never import a backend (the contract they share lies below both, in
`contract`), no plotting module imports the analysis (a figure draws the tables the analysis
wrote), and no analysis folder holds more than 15 modules."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "workflow" / "gpudissect"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_only(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _imports(path: Path, modules: set[str]) -> set[str]:
    """Package modules `path` imports, anywhere but under `if TYPE_CHECKING:`."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if _type_checking_only(node):
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            if node.level:
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                if sub in modules:
                    found.add(sub)
                elif target in modules:
                    found.add(target)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(), filename=str(path)))
    found.discard(name)
    return found


def import_graph() -> dict[str, set[str]]:
    paths = sorted(PACKAGE.rglob("*.py"))
    modules = {_module_name(p) for p in paths}
    return {_module_name(p): _imports(p, modules) for p in paths}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


def test_the_circle_finder_finds_a_circle():
    # a -> b -> c -> a is one circle; d -> a hangs off it
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circles():
    assert circles(import_graph()) == []


def backend_imports(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Per experiment module, the backend modules it imports (none allowed)."""
    out = {}
    for module, imports in graph.items():
        if module.startswith("gpudissect.experiments"):
            backends = {m for m in imports if m.startswith("gpudissect.backends")}
            if backends:
                out[module] = backends
    return out


def test_the_backend_check_finds_a_planted_import():
    graph = {
        "gpudissect.experiments.x": {"gpudissect.backends.sim", "gpudissect.contract.backend"},
        "gpudissect.experiments.y": {"gpudissect.contract.facts"},
        "gpudissect.backends.sim": {"gpudissect.experiments.x"},
    }
    assert backend_imports(graph) == {"gpudissect.experiments.x": {"gpudissect.backends.sim"}}


def test_experiments_import_no_backend():
    # the experiment owns its work description and a backend receives it: the contract both
    # sides share (work types, the Backend protocol, device facts) lives below both, in
    # `contract`, so no experiment reaches up into backends, not even for the interface
    assert backend_imports(import_graph()) == {}


def test_experiments_and_backends_share_the_contract():
    # the contract sits below both rooms: it imports neither
    graph = import_graph()
    contract = {m: i for m, i in graph.items() if m.startswith("gpudissect.contract")}
    assert contract, "no gpudissect.contract modules"
    for module, imports in contract.items():
        above = {
            m for m in imports if m.startswith(("gpudissect.experiments", "gpudissect.backends"))
        }
        assert not above, (module, above)


MAX_MODULES_PER_FOLDER = 15


def crowded_folders(root: Path, limit: int = MAX_MODULES_PER_FOLDER) -> dict[str, int]:
    """Folders under `root` (itself included) holding more than `limit` modules (__init__ not
    counted)."""
    out = {}
    for folder in [root, *(p for p in root.rglob("*") if p.is_dir())]:
        n = sum(1 for p in folder.glob("*.py") if p.name != "__init__.py")
        if n > limit:
            out[str(folder.relative_to(root))] = n
    return out


def test_the_folder_count_finds_a_crowded_folder(tmp_path):
    (tmp_path / "sub").mkdir()
    for i in range(3):
        (tmp_path / "sub" / f"m{i}.py").write_text("")
    (tmp_path / "sub" / "__init__.py").write_text("")
    (tmp_path / "one.py").write_text("")
    assert crowded_folders(tmp_path, limit=2) == {"sub": 3}
    assert crowded_folders(tmp_path, limit=3) == {}


def test_no_analysis_folder_over_15_modules():
    # an experiment's whole analysis in one folder of its subject, none a crowd to search
    assert crowded_folders(PACKAGE / "analysis") == {}


def test_no_plotting_module_imports_the_analysis():
    for module, imports in import_graph().items():
        if module.startswith("gpudissect.plotting"):
            analysis = {m for m in imports if m.startswith("gpudissect.analysis")}
            assert not analysis, (module, analysis)
