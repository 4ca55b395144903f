"""The line rule (analysis.caches.cache_line) on seeded synthetic caches whose answers are known.

A synthetic cache holds `capacity(stride)` elements of a stride walk; a walk of more elements
misses on a share of its timed accesses (all of them for LRU; for a cache that keeps what fits,
the share of elements it cannot hold), plus timing outliers at a known rate. The walks are
driven the way the sweep drives them: `locate_line` names the next walk until it decides.
"""

import numpy as np
import pytest

from gpudissect.analysis.caches import cache_line as cl

C = 216 * 1024  # the H100's L1 at carveout 0
OUTLIERS = 0.001
RECORDS = 2048


def _lru(cap, n):
    return 0.0 if n <= cap else 1.0


def _keeps_what_fits(cap, n):
    return 0.0 if n <= cap else 1.0 - cap / n


def _run(capacity, share=_lru, *, size=C, first=32, seed=0, runnable=None):
    """Drive `locate_line` over a synthetic cache; returns (finding, walks run)."""
    rng = np.random.default_rng(seed)
    walks = {}
    kw = {"runnable": runnable} if runnable else {}
    for _ in range(64):
        f = cl.locate_line(walks, size_bytes=size, first_bytes=first, max_line_bytes=512, **kw)
        if f.next_walk is None:
            return f, walks
        p, s, check = f.next_walk
        n = cl.walk_elements(size, p, check=check)
        records = RECORDS * len(cl.windows(n, RECORDS, 4))
        miss = share(capacity(s), n)
        slow = (rng.random(records) < miss) | (rng.random(records) < OUTLIERS)
        walks[f.next_walk] = cl.line_walk(
            slow, outlier_rate=OUTLIERS, candidate_bytes=p, stride_bytes=s, check=check, elements=n
        )
    raise AssertionError("the line search did not end")


def _cache(line, *, size=C, hashed=True, keep=0.985):
    """Elements that fit at stride s: C / min(s, b) (a hashed cache holds `keep` of that, as the
    H100 L1 holds 1703 of 1728 lines); on a bit-indexed cache a power-of-two stride of 2^k
    lines uses 1 / 2^k of the sets."""

    def capacity(s):
        cap = keep * size / min(s, line)
        if not hashed and s > line and s % line == 0 and (s // line) & (s // line - 1) == 0:
            cap /= s // line
        return cap

    return capacity


@pytest.mark.parametrize("share", [_lru, _keeps_what_fits])
@pytest.mark.parametrize("hashed", [True, False])
def test_216_kib_cache_of_128_byte_lines_gives_128(hashed, share):
    # 216 KiB, 128 B lines, 32 B granule: P = 32 and 64 overflow at both strides (their walks of
    # 7/8 C / P elements need at least 1.31 C); P = 128 fits at stride 256 on a hashed cache
    # (1512 elements, 1702 fit) and at stride 192 on a bit-indexed one (stride 256 uses half
    # the sets: 851 elements fit); the check walk of 5/4 C / 128 = 2160 elements overflows.
    f, walks = _run(_cache(128, hashed=hashed), share)
    assert f.line_bytes == 128 and f.checked and f.confidence > 0.95
    assert f.stride_bytes == (256 if hashed else 192)
    tried = {(p, s) for p, s, check in walks if not check}
    assert tried == {(32, 64), (32, 48), (64, 128), (64, 96), (128, 256)} | (
        set() if hashed else {(128, 192)}
    )


def test_counts_that_keep_halving_leave_the_line_undetermined():
    # a cache whose element count falls as C / s at every stride up to 1024 B: no candidate up
    # to 512 B fits (each walk needs 1.31 C or 1.75 C)
    f, _ = _run(lambda s: 0.985 * C / s)
    assert f.line_bytes is None and "keeps falling" in f.reason


def test_a_few_misses_at_7_8_load_fit_against_the_check_walk():
    # a hashed cache where a few sets overflow at 7/8 load: 2% of the walk misses at P = b,
    # against 40% for the check walk (ratio 0.05 < 0.25); below the line the walks miss 40%+
    def share(cap, n):
        return 0.02 if n <= 0.9 * C / 128 else 0.4

    f, walks = _run(_cache(128), share)
    assert f.line_bytes == 128 and f.checked
    assert (128, 256, True) in walks
    assert "of the check walk's miss share" in " ".join(f.log)


def test_a_check_walk_that_fits_too_leaves_the_line_undetermined():
    # every stride up to 128 B is crowded (count C / s), yet at 192 B and more 2C/128 elements
    # fit: the walk at P = 128 fits and so does its check (5/4 C / 128 elements): the line
    # would be at most 64 B, which P = 64 contradicted
    f, _ = _run(lambda s: 0.985 * C / s if s <= 128 else 2 * 0.985 * C / 128)
    assert f.line_bytes is None and "fits too" in f.reason


def test_a_path_limit_skips_the_walks_it_cannot_address():
    # the constant L1.5 behind 64 KiB: C = 32 KiB, 256 B lines; stride 512 crowds (bit
    # indexed), stride 384 fits, its check of 160 elements x 384 B = 60 KiB is addressable
    cache = _cache(256, size=32768, hashed=False)
    f, _ = _run(cache, size=32768, first=256, runnable=lambda n, s: n * s <= 65536)
    assert f.line_bytes == 256 and f.stride_bytes == 384 and f.checked
    # a limit that forbids the check: bounded from below only, half the confidence
    f, _ = _run(cache, size=32768, first=256, runnable=lambda n, s: n * s <= 50000)
    assert f.line_bytes == 256 and not f.checked and f.confidence <= 0.5
    # a limit that forbids every walk of a candidate: undetermined, with the reason
    f, _ = _run(cache, size=32768, first=256, runnable=lambda n, s: n * s <= 40000)
    assert f.line_bytes is None and "address limit" in f.reason


def test_windows_cover_one_pass():
    # 6076 elements (7/8 C / 32 on the H100) in 2048-load windows: 3 windows cover the pass
    assert cl.windows(6076, 2048, 4) == [0, 2025, 4050]
    assert cl.windows(1512, 2048, 4) == [0]
    # longer walks: at most 4 windows, spread evenly
    assert cl.windows(100000, 2048, 4) == [0, 25000, 50000, 75000]


def test_candidates_and_strides():
    assert cl.candidates(32, 512) == [32, 64, 128, 256, 512]
    assert cl.candidate_strides(32) == (64, 48, 80)
    assert cl.candidate_strides(4) == (8,)  # 6 and 10 B are not whole 4-byte elements
    # 7/8 and 5/4 of C / P, rounded up: 221184 / 128 = 1728 -> 1512 and 2160
    assert cl.walk_elements(221184, 128, check=False) == 1512
    assert cl.walk_elements(221184, 128, check=True) == 2160
