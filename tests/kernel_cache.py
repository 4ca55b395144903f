"""The simulator's compiled kernels, shared between the suite's copies of the workflow.

numba keeps each kernel's machine code beside its source (`cache=True`: the sim package's
`__pycache__`), and uses it while the source file's modification time and size are those it was
compiled from. A pipeline's jobs import the package the environment has installed (the
checkout's, editable) unless PYTHONPATH names another: a test that runs the pipeline with its
copy's package first (the bundle's build, the node test) starts with no cache and compiles the
kernels again. The tiny device's l1_size sweep, alone in a fresh copy, took 42.8 s with the
kernels compiled and 1.5 s with them cached (2-core machine). The suite's copies keep the
checkout's modification times (shutil.copytree and copy2 copy them), so `share_kernel_cache(tree)`
points the copy's `sim/__pycache__` at the checkout's own: the first run that needs a kernel
compiles it there, every later run, in the checkout or a linked copy, loads it.

Only a copy whose simulator sources are the checkout's, byte for byte and with the same
modification times, is linked; any other copy keeps its own cache, as before. numba checks its
index against the source as it would in the checkout (a stale entry is compiled again), and
Python's own bytecode files beside the kernels are checked the same way.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SIM = Path("workflow", "gpudissect", "sim")


def _same_sources(tree: Path) -> bool:
    ours = sorted(p.name for p in (REPO / SIM).glob("*.py"))
    theirs = sorted(p.name for p in (tree / SIM).glob("*.py"))
    if not ours or ours != theirs:
        return False
    for name in ours:
        a, b = REPO / SIM / name, tree / SIM / name
        sa, sb = a.stat(), b.stat()
        if (sa.st_mtime_ns, sa.st_size) != (sb.st_mtime_ns, sb.st_size):
            return False
        if a.read_bytes() != b.read_bytes():
            return False
    return True


def share_kernel_cache(tree: Path) -> bool:
    """Link `tree`'s sim `__pycache__` to the checkout's when its simulator sources are the
    checkout's (the copy made with the modification times kept); returns whether it did."""
    if not _same_sources(tree):
        return False
    shared = REPO / SIM / "__pycache__"
    shared.mkdir(exist_ok=True)
    own = tree / SIM / "__pycache__"
    if own.is_symlink():
        return own.resolve() == shared.resolve()
    if own.exists():  # a cache of its own already: left as it is
        return False
    os.symlink(shared, own, target_is_directory=True)
    return True
