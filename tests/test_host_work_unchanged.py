"""The sweeps' host work made faster returns what it returned before: each replaced function is
kept here as it was, as the reference, and compared with its replacement on varied inputs
(seeded synthetic data and the latencies of the committed H200 traces)."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gpudissect.analysis.caches import cache_structure as cs
from gpudissect.analysis.caches.level_size import Classifier
from gpudissect.analysis.common.misses import binom_sf
from gpudissect.analysis.l2 import l2_shares as l2s
from gpudissect.analysis.l2 import l2_slices as l2sl
from gpudissect.analysis.requests import requests as rq
from gpudissect.analysis.tlb import tlb_mappings as tm
from gpudissect.analysis.tlb import tlb_shift
from gpudissect.analysis.tlb.tlb import _slow_threshold
from gpudissect.analysis.tlb.tlb_levels import (
    Level,
    at_or_above,
    find_levels,
    level_containing,
    miss_spacing,
    misses_per_traversal,
    robust_sigma,
)
from gpudissect.analysis.tlb.tlb_pages import merge_into_base
from gpudissect.analysis.tlb.tlb_walks import SeriesWalks
from gpudissect.experiments import pointer_walk as pw
from gpudissect.experiments.pointer_walk import SECTOR_BYTES, WORD_BYTES

REPO = Path(__file__).resolve().parents[1]
H200 = REPO / "results" / "reference" / "h200" / "traces" / "gpu0"


# --- the reference implementations, as they were ----------------------------------------------
def find_levels_before(
    values, *, sigma, min_count=8, min_share=0.002, valley_ratio=0.6
) -> list[Level]:
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return []
    v = v[v <= 50 * max(np.median(v), 1.0)]
    lo = np.floor(v.min()) - 8
    bins = np.floor(v - lo).astype(np.int64)
    hist = np.bincount(bins, minlength=int(bins.max()) + 9).astype(np.float64)
    width = max(0.6, 0.45 * sigma)
    half = int(np.ceil(4 * width))
    kernel = np.exp(-0.5 * (np.arange(-half, half + 1) / width) ** 2)
    smooth = np.convolve(hist, kernel / kernel.sum(), mode="same")
    peaks = [
        i
        for i in range(1, len(smooth) - 1)
        if smooth[i] > smooth[i - 1] and smooth[i] >= smooth[i + 1] and smooth[i] > 1e-9
    ]
    if not peaks:
        return []
    edges = [0]
    for a, b in zip(peaks[:-1], peaks[1:], strict=True):
        edges.append(a + int(np.argmin(smooth[a : b + 1])))
    edges.append(len(smooth))
    basins = [[p, edges[k], edges[k + 1]] for k, p in enumerate(peaks)]
    merged = True
    while merged and len(basins) > 1:
        merged = False
        for k in range(len(basins) - 1):
            a, b = basins[k], basins[k + 1]
            valley = smooth[a[2]] if a[2] < len(smooth) else 0.0
            if valley > valley_ratio * min(smooth[a[0]], smooth[b[0]]):
                top = a[0] if smooth[a[0]] >= smooth[b[0]] else b[0]
                basins[k : k + 2] = [[top, a[1], b[2]]]
                merged = True
                break
    need = max(min_count, min_share * v.size)
    kept = []
    for _, a, b in basins:
        inside = v[(bins >= a) & (bins < b)]
        if inside.size >= need:
            kept.append((float(np.median(inside)), lo + a, lo + b))
    levels = []
    for k, (center, a, b) in enumerate(kept):
        lower = a if k == 0 else (kept[k - 1][0] + center) / 2
        upper = b if k == len(kept) - 1 else (center + kept[k + 1][0]) / 2
        inside = v[(v >= lower) & (v < upper)]
        levels.append(Level(center, float(lower), float(upper), int(inside.size)))
    return levels


def shift_onsets_before(
    df, *, alpha=1e-6, min_shift_cycles=3.0, min_addresses=3, spacing_share=0.6,
    unit_classes=False,
):  # fmt: skip
    out = []
    for stride, g in df.groupby("stride_bytes", sort=True):
        body = g[g["step"] > 0]
        med = body.groupby(["elements", "position"], sort=True)["latency_cycles"].median()
        by_m = {int(m): s.droplevel(0) for m, s in med.groupby(level=0, sort=True)}
        ms = sorted(by_m)
        if len(ms) < 3:
            continue
        pairs = []
        for a, b in zip(ms[:-1], ms[1:], strict=True):
            common = by_m[a].index.intersection(by_m[b].index)
            pairs.append((a, common, (by_m[b][common] - by_m[a][common]).to_numpy(np.float64)))
        pooled = np.concatenate([d for _, _, d in pairs])
        if pooled.size < 10:
            continue
        sigma = robust_sigma(pooled)
        null = max(float(np.mean(pooled > 3 * sigma)), 0.002)
        for i, (a, common, d) in enumerate(pairs[:-1]):
            before = np.concatenate([p[2] for p in pairs[:i]]) if i else np.empty(0)
            if before.size >= 20:
                sigma_before = robust_sigma(before)
                null_before = max(float(np.mean(before > 3 * sigma_before)), 0.002)
            else:
                sigma_before, null_before = sigma, null
            over = d > 3 * sigma_before
            for among, whole in tlb_shift._risen_candidates(
                common, over, int(stride), null_before, alpha, min_addresses, unit_classes
            ):
                onset = _onset_before(
                    int(stride), (a, ms[i + 1], ms[i + 2]), by_m, common, d, among,
                    sigma=sigma, sigma_before=sigma_before, min_shift_cycles=min_shift_cycles,
                    min_addresses=min_addresses, spacing_share=spacing_share, whole=whole,
                )  # fmt: skip
                if onset is not None:
                    out.append(onset)
                    break
            if out and out[-1].stride_bytes == stride:
                break
    return out


def _onset_before(
    stride, walks, by_m, common, d, among, *, sigma, sigma_before, min_shift_cycles,
    min_addresses, spacing_share, whole=False,
):  # fmt: skip
    a, b, c = walks
    if whole:
        rise = d[among]
        if rise.size < min_addresses or np.median(rise) < min_shift_cycles:
            return None
        cut = 0.5 * float(np.median(rise))
        risen = among
    else:
        rise = d[(d > 3 * sigma_before) & among]
        if rise.size < min_addresses or np.median(rise) < min_shift_cycles:
            return None
        cut = max(3 * sigma_before, min(3 * sigma, 0.25 * float(np.median(rise))))
        risen = (d > cut) & among
    shifted = common[risen]
    if shifted.size < min_addresses:
        return None
    later = by_m[c].reindex(shifted) - by_m[a][shifted]
    if float(np.nanmedian(later.to_numpy(np.float64))) < cut:
        return None
    addr = np.sort(shifted.to_numpy(np.int64)) * tlb_shift.ELEMENT_BYTES
    values, counts = np.unique(np.diff(addr), return_counts=True)
    k = int(np.argmax(counts))
    share = float(counts[k] / counts.sum())
    if share < spacing_share:
        return None
    return tlb_shift.ShiftOnset(
        stride, a, b, tuple(int(x) for x in addr), int(common.size), float(np.median(d[risen])),
        float(cut), int(values[k]), share,
    )  # fmt: skip


def latency_levels_before(df):
    ref = df.loc[df["elements"] <= 3, "latency_cycles"].to_numpy(np.float64)
    lat = df["latency_cycles"].to_numpy(np.float64)
    if ref.size == 0:
        ref = lat[:64]
    base, sigma, _ = _slow_threshold(lat, ref)
    levels = merge_into_base(find_levels(lat, sigma=sigma), (base.lo, base.hi))
    b = level_containing(levels, base.center)
    if b is None:
        levels = sorted([*levels, base], key=lambda lv: lv.center)
        b = levels.index(base)
    return levels, b


def threshold_onsets_before(df, levels, base):
    stride = int(df["stride_bytes"].iloc[0])
    elements = df["elements"].to_numpy(np.int64)
    lat = df["latency_cycles"].to_numpy(np.float64)
    order = np.lexsort((df["step"].to_numpy(np.int64), elements))
    elements, lat = elements[order], lat[order]
    cuts = np.flatnonzero(np.diff(elements)) + 1
    walks = {
        int(e[0]): x[1:] for e, x in zip(np.split(elements, cuts), np.split(lat, cuts), strict=True)
    }
    ms = sorted(walks)
    longest = df[df["elements"] == ms[-1]].sort_values("step").iloc[1:]
    out = []
    for k in range(base + 1, len(levels)):
        misses = {
            m: misses_per_traversal(at_or_above(x, levels, k), m)[0] for m, x in walks.items()
        }
        first = None
        for m in reversed(ms):
            if misses[m] < tm.MIN_MISSES:
                break
            first = m
        if first is not None:
            first = tm._above_tail(ms, misses, first)
        if first is None:
            continue
        before = [m for m in ms if m < first]
        spacing, _ = miss_spacing(
            longest["position"].to_numpy(np.int64) * tm.ELEMENT_BYTES,
            at_or_above(longest["latency_cycles"].to_numpy(np.float64), levels, k),
        )
        out.append(tm.Onset(k - base, before[-1] if before else None, first, stride, None, spacing))
    return out


class SlotsBefore:
    def __init__(self, words_per_line: int) -> None:
        self.words = words_per_line
        self.keys = np.zeros(0, dtype=np.int64)
        self.next = np.zeros(0, dtype=np.int32)

    def place(self, lines: np.ndarray, timed: set[int]) -> list[int] | None:
        """The word of each visit: a line's visits take its next free words in order, except
        that the visit before a timed visit of the same line skips a word that would end its
        sector (so the timed visit reads the sector it filled). None when a line runs out."""
        per_sector = SECTOR_BYTES // WORD_BYTES
        lines = np.asarray(lines, dtype=np.int64)
        n = len(lines)
        if n == 0:
            return []
        new = np.setdiff1d(lines, self.keys)
        if len(new):
            keys = np.union1d(self.keys, new)
            grown = np.zeros(len(keys), dtype=np.int32)
            grown[np.searchsorted(keys, self.keys)] = self.next
            self.keys, self.next = keys, grown
        # visits grouped by line, in walk order within a line
        order = np.argsort(lines, kind="stable")
        by_line = np.searchsorted(self.keys, lines[order])
        first = np.r_[True, by_line[1:] != by_line[:-1]]
        start = np.maximum.accumulate(np.where(first, np.arange(n), 0))
        slot = self.next[by_line] + (np.arange(n) - start)
        # the visit before each timed one of the same line (its predecessor in the group)
        where = np.empty(n, dtype=np.int64)
        where[order] = np.arange(n)
        skip = np.zeros(n, dtype=np.int64)
        timed_at = np.fromiter((p for p in timed if p < n), dtype=np.int64)
        cand = where[timed_at]
        cand = np.sort(cand[~first[cand]] - 1)
        # only a line with a candidate at a sector's last word can skip (a skip shifts the
        # line's later visits, so its candidates are then taken one by one)
        lines_that_may = set(start[cand[slot[cand] % per_sector == per_sector - 1]].tolist())
        shift: dict[int, int] = {}
        for i in (
            cand[np.isin(start[cand], list(lines_that_may))].tolist() if lines_that_may else ()
        ):
            g = int(start[i])
            if (int(slot[i]) + shift.get(g, 0)) % per_sector == per_sector - 1:
                skip[i] = 1
                shift[g] = shift.get(g, 0) + 1
        if shift:
            run = np.cumsum(skip)
            before = run - skip
            slot = slot + run - before[start]
        last = np.r_[first[1:], True]  # the last visit of each line
        if int(slot[last].max()) >= self.words:
            return None
        self.next[by_line[last]] = slot[last] + 1
        out = np.empty(n, dtype=np.int64)
        out[order] = slot
        return out.tolist()


def partner_shares_before(frame: pd.DataFrame) -> pd.Series:
    f = frame[["reference_offset_bytes", "offset_bytes", "order", "elapsed_ns"]].copy()
    f["self"] = (f["offset_bytes"] == f["reference_offset_bytes"]).to_numpy()
    at = f.loc[f["self"], "order"].to_numpy(float)
    ns = f.loc[f["self"], "elapsed_ns"].to_numpy(float)
    order = f["order"].to_numpy(float)
    near = np.argsort(np.abs(order[:, None] - at[None, :]), axis=1, kind="stable")
    one = np.median(ns[near[:, : l2s.LOCAL_SELVES]], axis=1)
    f["share"] = np.where(
        one > 0, f["elapsed_ns"].to_numpy(float) / np.where(one > 0, one, 1), np.nan
    )
    f = f[~f["self"]]
    clean = f["share"] <= l2s.DISTURBED_SHARE
    has_clean = clean.groupby(f["offset_bytes"]).transform("any")
    f = f[clean | ~has_clean]
    return f.groupby("offset_bytes", sort=False)["share"].median()


def first_touch_gap_before(frame):
    lat = frame[frame["pass"] == 0].groupby("offset_bytes")["cycles"].min().to_numpy()
    if lat.size < l2sl.MIN_LINES:
        return None
    nf = l2sl.split_lines(lat.astype(float))
    return None if nf.far is None else float(nf.far_cycles - nf.near_cycles)


def contention_same_before(frame):
    return {int(o): bool(s > l2s.SAME_SHARE) for o, s in partner_shares_before(frame).items()}


def contention_ambiguous_before(frame):
    return [
        int(o)
        for o, s in partner_shares_before(frame).items()
        if abs(s - l2s.SAME_SHARE) < l2s.AMBIGUOUS_BAND or s > l2s.DISTURBED_SHARE
    ]


def line_miss_table_before(rows, classifier, line_bytes):
    k = rows["extra_lines"].to_numpy()
    line = rows["address_bytes"].to_numpy() // line_bytes
    miss = classifier.slow(rows["latency_cycles"].to_numpy())
    order = np.lexsort((line, k))
    k, line, miss = k[order], line[order], miss[order].astype(np.int64)
    first = np.flatnonzero(np.r_[True, (k[1:] != k[:-1]) | (line[1:] != line[:-1])])
    if not len(k):
        first = first[:0]
    out = pd.DataFrame(
        {
            "k": k[first],
            "line": line[first],
            "size": np.diff(np.r_[first, len(k)]).astype(np.int64),
            "sum": np.add.reduceat(miss, first) if len(k) else miss[:0],
        }
    )
    p = binom_sf(out["sum"].to_numpy() - 1, out["size"].to_numpy(), classifier.outlier_rate)
    out["missing"] = (out["sum"] >= 2) & (p < cs.LINE_ALPHA) | (out["sum"] == out["size"])
    return out


def run_latency_before(elapsed, block_threads):
    a = np.asarray(elapsed)
    if a.size <= block_threads:
        return float(a.sum(dtype=np.float64)) / a.size
    return max(
        float(a[i : i + block_threads].sum(dtype=np.float64)) / a[i : i + block_threads].size
        for i in range(0, a.size, block_threads)
    )


def thread_latency_table_before(data):
    lengths = np.fromiter((len(a) for a in data["elapsed_cycles"]), np.int64, len(data))
    per_block = data["block_threads"] if "block_threads" in data.columns else lengths
    runs = map(run_latency_before, data["elapsed_cycles"], per_block)
    per_run = np.fromiter(runs, np.float64, len(data))
    blocks = data["blocks"] if "blocks" in data.columns else np.ones(len(data), np.int64)
    df = data[[*rq.KEYS, "threads"]].assign(run_latency=per_run, blocks=np.asarray(blocks))
    g = df.groupby([*rq.KEYS, "threads"], sort=True)
    out = g.agg(runs=("run_latency", "size"), blocks=("blocks", "max"))
    out.insert(0, "latency_cycles", rq._harmonic_means(per_run, g.ngroup().to_numpy(), len(out)))
    return out.reset_index()


# --- inputs -------------------------------------------------------------------------------------
def _mixtures():
    """Seeded latency mixtures: 1 to 6 levels of random centres, counts and jitter (integer
    and fractional samples), some with far outliers, NaNs or only a few samples."""
    rng = np.random.default_rng(37)
    out = []
    for case in range(60):
        k = int(rng.integers(1, 7))
        centers = np.sort(rng.uniform(20, 900, k))
        parts = [
            c + rng.normal(0, rng.uniform(0.3, 6.0), int(rng.integers(3, 4000))) for c in centers
        ]
        v = np.concatenate(parts)
        if case % 2:
            v = np.rint(v)
        if case % 5 == 0:
            v = np.concatenate([v, rng.uniform(1000, 60000, 7), [np.nan]])
        out.append(np.abs(v))
    return out


def _trace_latencies(name: str) -> np.ndarray:
    import pyarrow.parquet as pq

    path = H200 / f"{name}.parquet"
    if not path.exists():
        pytest.skip(f"{path.name}: no committed H200 trace")
    return pq.read_table(path, columns=["latency_cycles"]).column(0).to_numpy()


def _trace(name: str) -> pd.DataFrame:
    from gpudissect.traces import read_trace

    path = H200 / f"{name}.parquet"
    if not path.exists():
        pytest.skip(f"{path.name}: no committed H200 trace")
    return read_trace(path).data


def _jittered(df: pd.DataFrame, seed: int, spread: int) -> pd.DataFrame:
    """The walks with seeded integer jitter of +-spread cycles on every latency."""
    rng = np.random.default_rng(seed)
    lat = df["latency_cycles"].to_numpy(np.int64) + rng.integers(-spread, spread + 1, len(df))
    return df.assign(latency_cycles=np.maximum(lat, 1).astype(np.uint32))


# --- the comparisons ----------------------------------------------------------------------------
@pytest.mark.parametrize("sigma", [0.5, 1.3, 4.0])
def test_find_levels_is_unchanged_on_seeded_mixtures(sigma):
    for v in _mixtures():
        for kw in ({}, {"min_count": 2, "min_share": 0.0}, {"valley_ratio": 0.3}):
            assert find_levels(v, sigma=sigma, **kw) == find_levels_before(v, sigma=sigma, **kw)


@pytest.mark.parametrize("name", ["tlb_mappings", "tlbs"])
def test_find_levels_is_unchanged_on_the_h200_traces(name):
    lat = _trace_latencies(name).astype(np.float64)
    got = find_levels(lat, sigma=1.0)
    assert len(got) >= 2  # the trace holds several levels: the comparison is not empty
    assert got == find_levels_before(lat, sigma=1.0)
    part = lat[: lat.size // 3]
    assert find_levels(part, sigma=2.5) == find_levels_before(part, sigma=2.5)


@pytest.mark.parametrize("spread", [0, 2, 6])
def test_shift_onsets_is_unchanged_on_the_h200_walks(spread):
    reach = _trace("tlbs")
    reach = _jittered(reach[reach["stage"] == "reach"], 1, spread)
    for classes in (False, True):
        got = tlb_shift.shift_onsets(reach, unit_classes=classes)
        assert got == shift_onsets_before(reach, unit_classes=classes)
    walks = _jittered(_trace("tlb_mappings"), 2, spread)
    found = 0
    for _, mine in walks.groupby("layout"):
        got = tlb_shift.shift_onsets(mine, unit_classes=True)
        assert got == shift_onsets_before(mine, unit_classes=True)
        found += len(got)
    if spread == 0:
        assert found  # the H200's walks show onsets: the comparison is not of empty lists


@pytest.mark.parametrize("spread", [0, 3])
def test_the_sweeps_series_walks_read_round_by_round_are_unchanged(spread):
    # the sweep keeps each series' walks (SeriesWalks) between rounds and reads them after
    # every round: here each series' walks added in the order they were made, read after every
    # tenth walk, against the series' rows so far read by the reference implementations
    walks = _jittered(_trace("tlb_mappings"), 3, spread)
    levels = tm.latency_levels(walks)
    compared = onsets = 0
    for (layout, stride), series in walks.groupby(["layout", "stride_bytes"], sort=False):
        kept = SeriesWalks(int(stride))
        points = np.sort(series["point"].unique())
        for i, point in enumerate(points):
            walk = series[series["point"] == point].sort_values("step")
            kept.add(int(walk["elements"].iloc[0]), walk["position"], walk["latency_cycles"])
            if i % 10 != 9 and point != points[-1]:
                continue
            part = series[series["point"] <= point]
            want = shift_onsets_before(part, unit_classes=True)
            medians = {m: kept.medians(m) for m in kept.lengths()}
            got = tlb_shift.stride_onset(int(stride), medians, unit_classes=True, pairs=kept.pairs)
            assert ([got] if got is not None else []) == want
            assert tm.threshold_onsets(kept, *levels) == threshold_onsets_before(part, *levels)
            kw = {"layout": layout, "stride_bytes": int(stride), "levels": levels}
            assert tm.series_brackets(kept, levels) == tm.onset_brackets(part, **kw)
            compared += 1
            onsets += len(want)
    assert compared > 20 and onsets > 5  # onsets were read, not only empty lists compared


@pytest.mark.parametrize("spread", [0, 4])
def test_latency_levels_are_unchanged_on_the_h200_walks(spread):
    walks = _jittered(_trace("tlb_mappings"), 4, spread)
    assert len(tm.latency_levels(walks)[0]) >= 3  # levels to compare, not one
    # all walks; the first 40 (the sweep reads the levels after every series' grid); rows
    # without a walk of <= 3 elements (the first 64 latencies stand in for them)
    for part in (walks, walks[walks["point"] < 40], walks[walks["elements"] > 3].iloc[:5000]):
        assert tm.latency_levels(part) == latency_levels_before(part)


def _walk_tests(rng, count: int, *, least_lines: float = 0.0) -> list[pw.WalkTest]:
    """Seeded pointer-walk tests: short ones over a few lines (repeated, timed at random
    visits, often right after another visit of the same line) and long ones past the array
    path's threshold, over lines of a large window; each over at least `least_lines` x its
    visits distinct lines (some: a test that fits one launch)."""
    tests = []
    for _ in range(count):
        n = int(rng.choice([1, 3, 12, 40, pw.ARRAY_VISITS, pw.ARRAY_VISITS + 1, 900]))
        low = max(1, int(least_lines * n))
        pool = rng.integers(0, 1 << 22, int(rng.integers(low, max(low + 1, n // 3 + 1))))
        lines = rng.choice(pool, n)
        if rng.random() < 0.5:  # passes over the same lines, the last one timed (l1_sets)
            k = len(pool)
            lines = np.tile(pool, 3)
            timed = tuple(range(2 * k, 3 * k))
        else:
            timed = tuple(sorted(set(rng.integers(0, len(lines), int(rng.integers(0, 12))))))
        tests.append(pw.WalkTest(lines.astype(np.int64), timed))
    return tests


@pytest.mark.parametrize("seed", range(6))
def test_slots_place_the_same_words(seed):
    # one launch's slots through a run of tests, some of which no longer fit (None, nothing
    # taken), at line sizes of 4 to 32 words
    rng = np.random.default_rng(seed)
    words = int(rng.choice([4, 8, 16, 32]))
    new, ref = pw._Slots(words), SlotsBefore(words)
    outcomes = set()
    for test in _walk_tests(rng, 80):
        got = new.place(test.lines, set(test.timed))
        assert got == ref.place(test.lines, set(test.timed))
        outcomes.add(got is None)
    assert outcomes == {True, False}  # tests placed and tests refused were both compared


@pytest.mark.parametrize("seed", range(4))
def test_pack_makes_the_same_launches(seed, monkeypatch):
    rng = np.random.default_rng(100 + seed)
    tests = _walk_tests(rng, 120, least_lines=0.2)
    kw = {"window_bytes": 1 << 30, "line_bytes": 128, "shared_buffer_bytes": 4096,
          "carveout_pct": None}  # fmt: skip
    got = pw.pack(tests, **kw)
    monkeypatch.setattr(pw, "_Slots", SlotsBefore)
    want = pw.pack(tests, **kw)
    assert len(got) == len(want) > 1
    for a, b in zip(got, want, strict=True):
        assert (a.tests, a.records) == (b.tests, b.records)
        assert np.array_equal(a.work.offsets_bytes, b.work.offsets_bytes)
        assert np.array_equal(a.work.record_steps, b.work.record_steps)


def _searches(data: pd.DataFrame):
    """Frames like those the l2_slices sweep asks about: per search (reference, kind, class),
    its first third of launches, two thirds, and all of them."""
    phase = data[data["phase"] == 2]
    keys = ["reference_offset_bytes", "pass", "repetition"]
    for _, search in phase.groupby(keys, sort=False):
        for end in sorted({max(4, len(search) // 3), max(4, 2 * len(search) // 3), len(search)}):
            yield search.iloc[:end]


@pytest.mark.parametrize("disturb", [False, True])
def test_partner_shares_are_unchanged_on_every_search_of_the_h200_sweep(disturb):
    # as recorded, and disturbed: a seeded tenth of the launches 1.3x slower (shares past
    # DISTURBED_SHARE), some one-line launches timed at 0 (no one-slice duration: NaN shares)
    data = _trace("l2_slices")
    if disturb:
        rng = np.random.default_rng(5)
        ns = data["elapsed_ns"].to_numpy(np.float64).copy()
        ns[rng.random(len(ns)) < 0.1] *= 1.3
        ns[
            (rng.random(len(ns)) < 0.05) & (data["offset_bytes"] == data["reference_offset_bytes"])
        ] = 0
        data = data.assign(elapsed_ns=ns)
    frames = 0
    for frame in _searches(data):
        pd.testing.assert_series_equal(
            l2s.partner_shares(frame), partner_shares_before(frame), check_exact=True
        )
        # the sweep's two questions, asked of the frame and of its columns' arrays (the sweep
        # keeps a search as those)
        columns = {c: frame[c].to_numpy() for c in frame.columns}
        for asked in (frame, columns):
            assert l2s.contention_same(asked) == contention_same_before(frame)
            assert l2s.contention_ambiguous(asked) == contention_ambiguous_before(frame)
        frames += 1
    assert frames > 100


@pytest.mark.parametrize("spread", [0, 40])
def test_first_touch_gaps_are_unchanged_on_every_sm_of_the_h200_sweep(spread):
    # per SM and phase, its walks' rows as recorded and with seeded jitter of +-spread cycles;
    # asked of the rows and of their columns' arrays (the sweep keeps a walk as those)
    data = _trace("l2_slices")
    data = data[data["phase"] != 2]
    rng = np.random.default_rng(6)
    jitter = rng.integers(-spread, spread + 1, len(data))
    cycles = np.maximum(data["cycles"].to_numpy(np.int64) + jitter, 1).astype(np.uint32)
    data = data.assign(cycles=cycles)
    gaps = []
    for _, frame in data.groupby(["phase", "sm"]):
        want = first_touch_gap_before(frame)
        columns = {c: frame[c].to_numpy() for c in ("pass", "offset_bytes", "cycles")}
        assert l2sl.first_touch_gap(frame) == want and l2sl.first_touch_gap(columns) == want
        gaps.append(want)
    assert len(gaps) > 100 and sum(g is not None for g in gaps) > 50
    short = data[data["sm"] == data["sm"].iloc[0]].iloc[: l2sl.MIN_LINES // 2]  # too few lines
    assert l2sl.first_touch_gap(short) is None is first_touch_gap_before(short)


def _replay():
    from benchmark_module import load_benchmark

    return load_benchmark("replay_host_work")


@pytest.mark.parametrize("name", ["l2_slices", "tlb_mappings", "l1_sets", "caches"])
def test_the_sweep_replayed_from_its_h200_trace_makes_the_traces_launches_and_rows(name):
    # the sweep's decisions (which launches, with which points) are the analysis's answers
    # between rounds: given back what the H200 measured, the sweep must ask for the same
    # launches and assemble the trace's rows, every column of them
    trace = _trace(name)
    rows, _, backend = _replay().replay(H200 / f"{name}.parquet")
    assert backend.launches > 100
    assert sorted(rows.columns) == sorted(trace.columns)
    pd.testing.assert_frame_equal(
        rows[trace.columns].reset_index(drop=True), trace.reset_index(drop=True), check_dtype=False
    )


def test_line_miss_tables_are_unchanged_on_the_h200_sets_phase():
    # every k of the H200 caches sweep's sets phase (its launches pooled), under the
    # reference classifier of its level and two stricter and looser ones; and an empty table
    data = _trace("caches")
    compared = 0
    for _, rows in data.groupby(["path", "level"]):
        ref = rows.loc[rows["phase"] == "reference", "latency_cycles"].to_numpy()
        base = cs.reference_classifier(ref)
        sets = rows[rows["phase"] == "sets"]
        for shift, rate in ((0.0, base.outlier_rate), (-8.0, 0.05), (15.0, 1e-4)):
            c = Classifier(base.hit_latency_cycles, base.threshold_cycles + shift, rate)
            for _, one in sets.groupby("extra_lines"):
                got = cs.line_miss_table(one, c, 128)
                pd.testing.assert_frame_equal(got, line_miss_table_before(one, c, 128))
                compared += 1
            pd.testing.assert_frame_equal(
                cs.line_miss_table(sets, c, 128), line_miss_table_before(sets, c, 128)
            )
    assert compared > 100
    empty = data.iloc[:0]
    pd.testing.assert_frame_equal(
        cs.line_miss_table(empty, base, 128), line_miss_table_before(empty, base, 128)
    )


def _request_runs(seed: int, with_blocks: bool) -> pd.DataFrame:
    """Seeded runs of 1 to 4096 threads in one block or several (block_threads_of), thread
    times up to 2^32 - 1 cycles, as lists or as uint32 arrays."""
    from gpudissect.experiments.requests import block_threads_of, blocks_of

    rng = np.random.default_rng(seed)
    rows = []
    for i in range(300):
        threads = int(rng.choice([1, 2, 31, 32, 1024, 1025, 1056, 2047, 3000, 4096]))
        top = int(rng.choice([2000, 2**20, 2**32 - 1]))
        elapsed = rng.integers(1, top, threads, endpoint=True).astype(np.uint32)
        rows.append({"pattern": ("unq", "merger2")[i % 2], "merge_threads": 1 + i % 2,
                     "loads_per_thread": 1 + i % 3, "threads": threads, "run": i % 3,
                     "blocks": blocks_of(threads), "block_threads": block_threads_of(threads),
                     "elapsed_cycles": elapsed.tolist() if i % 5 == 0 else elapsed})  # fmt: skip
    df = pd.DataFrame(rows)
    return df if with_blocks else df.drop(columns=["blocks", "block_threads"])


@pytest.mark.parametrize("with_blocks", [True, False])
@pytest.mark.parametrize("seed", range(3))
def test_thread_latency_table_is_unchanged_on_seeded_runs(seed, with_blocks):
    data = _request_runs(seed, with_blocks)
    assert (data["threads"] > 1024).any() and (data["threads"] <= 1024).any()
    pd.testing.assert_frame_equal(
        rq.thread_latency_table(data), thread_latency_table_before(data), check_exact=True
    )


def test_thread_latency_table_is_unchanged_on_every_repeat_of_the_h200_sweep():
    data = _trace("requests")
    repeats = 0
    for _, one in data.groupby("repeat"):
        pd.testing.assert_frame_equal(
            rq.thread_latency_table(one), thread_latency_table_before(one), check_exact=True
        )
        repeats += 1
    assert repeats > 1


def pattern_offsets_before(*, threads, loads_per_thread, merge_threads, block_bytes):
    groups = -(-threads // merge_threads)
    t = np.arange(threads)[:, None]
    j = np.arange(loads_per_thread)[None, :]
    return ((j * groups + t // merge_threads) * block_bytes).astype(np.uint32)


@pytest.mark.parametrize("block_bytes", [4, 128, 32768])
def test_pattern_offsets_are_unchanged(block_bytes):
    from gpudissect.experiments.requests import PATTERNS, pattern_offsets

    compared = 0
    for threads in (1, 2, 3, 31, 32, 33, 1000, 1024, 1056, 2048, 4096):
        for n in range(1, 9):
            if n * threads * block_bytes >= 2**32:  # parse_params refuses these footprints
                continue
            for k in PATTERNS.values():
                kw = {"threads": threads, "loads_per_thread": n, "merge_threads": k,
                      "block_bytes": block_bytes}  # fmt: skip
                got, want = pattern_offsets(**kw), pattern_offsets_before(**kw)
                assert got.dtype == want.dtype and got.flags.c_contiguous
                assert np.array_equal(got, want), kw
                compared += 1
    assert compared > 400
