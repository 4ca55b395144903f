"""tests/kernel_cache.py: a copy of the workflow shares the checkout's compiled kernels only when
its simulator sources are the checkout's, bytes and modification times."""

import os
import shutil

from kernel_cache import REPO, SIM, share_kernel_cache


def _copy_sim(tree):
    shutil.copytree(REPO / SIM, tree / SIM, ignore=shutil.ignore_patterns("__pycache__"))
    return tree / SIM


def test_a_copy_that_kept_the_times_shares_the_checkouts_cache(tmp_path):
    sim = _copy_sim(tmp_path)
    assert share_kernel_cache(tmp_path)
    assert (sim / "__pycache__").is_symlink()
    assert (sim / "__pycache__").resolve() == (REPO / SIM / "__pycache__").resolve()
    assert share_kernel_cache(tmp_path)  # linked already: nothing changes


def test_a_copy_with_other_times_keeps_its_own_cache(tmp_path):
    sim = _copy_sim(tmp_path)
    kernels = sim / "_kernels.py"
    stat = kernels.stat()
    os.utime(kernels, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert not share_kernel_cache(tmp_path)
    assert not (sim / "__pycache__").exists()


def test_a_copy_with_an_edited_source_keeps_its_own_cache(tmp_path):
    sim = _copy_sim(tmp_path)
    kernels = sim / "_kernels.py"
    stat = kernels.stat()
    text = kernels.read_bytes()
    # the same size and time, one byte changed: numba's check would pass, this one does not
    kernels.write_bytes(text[:-2] + (b"#" if text[-2:-1] != b"#" else b" ") + text[-1:])
    os.utime(kernels, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert kernels.stat().st_size == stat.st_size
    assert not share_kernel_cache(tmp_path)
    assert not (sim / "__pycache__").exists()


def test_a_copy_with_a_cache_of_its_own_is_left_alone(tmp_path):
    sim = _copy_sim(tmp_path)
    (sim / "__pycache__").mkdir()
    (sim / "__pycache__" / "x.nbi").write_bytes(b"")
    assert not share_kernel_cache(tmp_path)
    assert (sim / "__pycache__" / "x.nbi").is_file()


def test_a_tree_without_the_simulator_is_left_alone(tmp_path):
    assert not share_kernel_cache(tmp_path)
    assert not (tmp_path / SIM).exists()
