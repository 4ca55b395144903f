"""DESIGN.md principle 2: the analysis sees only traces. Nothing in gpudissect.analysis may import
the simulator or read a device profile."""

import ast
from pathlib import Path

ANALYSIS = Path(__file__).resolve().parents[1] / "workflow" / "gpudissect" / "analysis"
FORBIDDEN_MODULES = ("gpudissect.sim", "gpudissect.backends")
FORBIDDEN_RELATIVE = ("sim", "backends")
FORBIDDEN_TEXT = ("config/devices", "load_profile", "profile.schema", "SimGPU")


def _imports(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield 0, alias.name
        elif isinstance(node, ast.ImportFrom):
            yield node.level, node.module or ""


def test_analysis_modules_exist():
    assert len(list(ANALYSIS.rglob("*.py"))) >= 3


def test_analysis_does_not_import_simulator_or_backends():
    offenders = []
    for path in ANALYSIS.rglob("*.py"):
        tree = ast.parse(path.read_text(), filename=str(path))
        for level, module in _imports(tree):
            absolute = module.startswith(FORBIDDEN_MODULES)
            # from ..sim import x (level 2 from gpudissect.analysis) or from .. import sim
            relative = level >= 2 and module.split(".")[0] in FORBIDDEN_RELATIVE
            if absolute or relative or (level >= 2 and module == ""):
                offenders.append(f"{path.name}: {'.' * level}{module}")
    assert not offenders, offenders


def test_analysis_does_not_read_profiles():
    offenders = [
        f"{p.name}: {t}"
        for p in ANALYSIS.rglob("*.py")
        for t in FORBIDDEN_TEXT
        if t in p.read_text()
    ]
    assert not offenders, offenders


def test_checker_catches_a_planted_import(tmp_path):
    # the check itself must be able to fail
    planted = "from ..sim.engine import SimGPU\nimport gpudissect.sim\n"
    tree = ast.parse(planted)
    found = [
        m
        for lvl, m in _imports(tree)
        if m.startswith(FORBIDDEN_MODULES) or (lvl >= 2 and m.split(".")[0] == "sim")
    ]
    assert len(found) == 2
