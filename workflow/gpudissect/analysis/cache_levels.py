"""Stage 1 of the two-stage fine-grained P-chase (Mei & Chu, TPDS Sec. 4.2, Fig. 6; NPC 2014
Sec. 3): the size C, the miss granule (sector), the line size b and the hit and miss latencies of
one cache level on one load path. Sees only traces.

The rules, each applied to per-access latencies:

- **Size C** (TPDS step 1): arrays of growing size N at a small stride; C is the largest N
  before the first size whose slow accesses the timing-outlier rate cannot explain
  (`misses.FirstMissDetector`: binomial test). The sweep's resolution bounds C.
- **Miss granule g** (TPDS step 2, "the distance between missing accesses"): at stride one
  element (4 bytes) just past C, only the first access into a granule (a line, or a sector of a
  sectored line) can miss; the others hit the granule just loaded. g is the largest power of
  two that divides (nearly) all missed addresses. Two sizes are walked, C + 4 and C + C/8, so
  that misses fall on odd multiples of g too (at C + 4 an LRU cache with bit-indexed sets misses
  only in one set, whose lines lie a whole way apart).
- **Line b, separate from the sector** (capacity against stride): a stride below b touches every
  line, so an array of C + C/8 bytes overflows; a stride of 1.5 L (L = g, 2g, 4g, ...) skips a
  third of the lines once L >= b, and the same array then fits in 3/4 of the cache. b is the
  smallest L whose 1.5 L stride does not miss. Non-power-of-two strides keep bit-indexed sets
  evenly used (a stride of 2 L would use half of the sets and miss again). On a cache without
  sectors b = g; on a sectored one (Hopper L1: 128 B lines, 32 B sectors) b > g.
- **Latencies**: the hit latency is the median of the accesses of the arrays that fit; the miss
  latency the median of the accesses classified as misses at the larger arrays; the miss
  penalty their difference.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .misses import FirstMissDetector, binom_sf

GRANULE_TOLERANCE = 0.05  # share of missed addresses allowed off the granule (outliers)
MIN_GRANULE_MISSES = 16  # fewest classified misses the granule rule works with
LINE_ALPHA = 0.01  # significance of "this stride still misses"
# Below the line the per-visit miss shares of test and control agree (ratio ~1: the same lines
# at the same load); once lines are skipped the ratio falls, to ~0.1 on hashed random caches
# and 0.6 on an XOR-hashed 8-way L1 whose test pattern still overfills some sets.
LINE_RATIO = 0.8


@dataclass(frozen=True)
class Classifier:
    """Hit/miss classification of one level: hits below `threshold_cycles`; misses in the band
    up to `ceiling_cycles` (accesses above it are timing outliers, or a miss with an outlier)."""

    hit_latency_cycles: float
    threshold_cycles: float
    outlier_rate: float
    ceiling_cycles: float = float("inf")

    def slow(self, latency: np.ndarray) -> np.ndarray:
        return np.asarray(latency, dtype=np.float64) > self.threshold_cycles

    def miss(self, latency: np.ndarray) -> np.ndarray:
        lat = np.asarray(latency, dtype=np.float64)
        return (lat > self.threshold_cycles) & (lat <= self.ceiling_cycles)


@dataclass(frozen=True)
class SizeFinding:
    size_bytes: int | None  # largest size that fits; None when undetermined
    next_bytes: int | None  # first size that misses
    reason: str | None  # why undetermined
    classifier: Classifier | None
    detector: FirstMissDetector | None
    sizes_bytes: np.ndarray
    groups: list[np.ndarray]

    @property
    def resolution_bytes(self) -> int | None:
        if self.size_bytes is None or self.next_bytes is None:
            return None
        return self.next_bytes - self.size_bytes


def locate_size(sizes_bytes, groups, *, alpha: float = 0.01) -> SizeFinding:
    """The first array size that misses (TPDS step 1) over per-size latency groups."""
    order = np.argsort(sizes_bytes)
    sizes = np.asarray(sizes_bytes, dtype=np.int64)[order]
    groups = [np.asarray(groups[i], dtype=np.float64) for i in order]
    if len(sizes) < 3:
        return SizeFinding(
            None, None, f"only {len(sizes)} sizes swept; need >= 3", None, None, sizes, groups
        )
    det = FirstMissDetector(alpha=alpha).fit(sizes, groups)
    ref = np.concatenate(groups[: det.reference_sizes])
    hit = float(np.median(ref))
    threshold = getattr(det, "_threshold", None)
    rate = (
        det.result.outlier_rate
        if det.result
        else (np.sum(ref > threshold) + 1.0) / (ref.size + 2.0)
    )
    classifier = Classifier(hit, float(threshold), float(rate))
    if not det.reference_ok:
        reason = (
            f"the smallest arrays ({sizes[0]} bytes) are slower than larger ones: they already "
            "miss; the cache is smaller than the swept range"
        )
        return SizeFinding(None, None, reason, classifier, det, sizes, groups)
    if det.result is None:
        reason = (
            f"no size between {sizes[0]} and {sizes[-1]} bytes misses more often than timing "
            f"outliers explain: the cache holds at least {sizes[-1]} bytes, or no cache of this "
            f"latency level ({hit:.0f} cycles) sits on the path"
        )
        return SizeFinding(None, None, reason, classifier, det, sizes, groups)
    r = det.result
    # the miss band: misses of this level come back at the next level's latency; far slower
    # accesses are timing outliers (or a miss hit by one) and do not mark a granule
    after = np.concatenate(groups[r.index :])
    slow = after[after > r.threshold_cycles]
    ceiling = float("inf")
    if slow.size >= 8:
        level = float(np.median(slow))
        spread = 1.4826 * float(np.median(np.abs(slow - level)))
        ceiling = level + max(6.0 * spread, 0.25 * (level - hit), 8.0)
    classifier = Classifier(hit, r.threshold_cycles, r.outlier_rate, ceiling)
    return SizeFinding(int(r.x_before), int(r.x_after), None, classifier, det, sizes, groups)


def granule_sizes(size_bytes: int) -> tuple[int, int]:
    """The two array sizes the granule rule walks at stride 4: C + 4 and C + C/8."""
    return size_bytes + 4, size_bytes + max(4, (size_bytes // 8) // 4 * 4)


@dataclass(frozen=True)
class GranuleFinding:
    granule_bytes: int | None
    misses: int
    off_granule: int  # misses off the granule (outliers, or a wrong model)
    odd_multiples: int  # misses at odd multiples of the granule: they bound it from above
    reason: str | None


def miss_granule(addresses_bytes: np.ndarray, missed: np.ndarray) -> GranuleFinding:
    """Largest power of two dividing all but a few missed addresses (see module docstring)."""
    addr = np.asarray(addresses_bytes, dtype=np.int64)[np.asarray(missed, dtype=bool)]
    n = int(addr.size)
    if n < MIN_GRANULE_MISSES:
        return GranuleFinding(
            None,
            n,
            0,
            0,
            f"only {n} misses at stride 4 just past the cache size; need >= {MIN_GRANULE_MISSES}",
        )
    g = 4
    while g < (1 << 24) and np.mean(addr % (2 * g) == 0) >= 1 - GRANULE_TOLERANCE:
        g *= 2
    off = int(np.sum(addr % g != 0))
    odd = int(np.sum(addr % (2 * g) == g))
    if odd == 0:
        return GranuleFinding(
            None, n, off, 0, f"every missed address is a multiple of {2 * g} bytes: no bound"
        )
    return GranuleFinding(g, n, off, odd, None)


def line_test_size(size_bytes: int) -> int:
    """The array size of the capacity-against-stride test: C + C/8 (4-byte aligned)."""
    return size_bytes + max(4, (size_bytes // 8) // 4 * 4)


def line_candidates(granule_bytes: int, max_line_bytes: int) -> list[int]:
    out, line = [], granule_bytes
    while line <= max_line_bytes:
        out.append(line)
        line *= 2
    return out


def still_misses(latency: np.ndarray, classifier: Classifier, *, alpha: float = LINE_ALPHA):
    """(misses, p-value, whether the misses exceed what the outlier rate explains)."""
    lat = np.asarray(latency, dtype=np.float64)
    k = int(np.sum(classifier.slow(lat)))
    p = float(binom_sf(k - 1, lat.size, classifier.outlier_rate)) if k else 1.0
    return k, p, p < alpha


@dataclass(frozen=True)
class LineTest:
    line_bytes: int  # the candidate L
    misses: int
    accesses: int
    p_value: float
    ratio: float  # line-miss rate at stride 1.5 L over that of the stride-4 control
    fits: bool
    control_ok: bool


def line_test(
    test_latency: np.ndarray,
    control_latency: np.ndarray,
    classifier: Classifier,
    *,
    candidate_bytes: int,
    granule_bytes: int,
) -> LineTest:
    """Does an array of C + C/8 bytes fit at stride 1.5 L (L = `candidate_bytes`)?

    The control is the same array at stride 4 (the granule walk), where every line is touched
    and a miss can only be the first access of a granule: its per-access miss share times
    g / 4 is the share of granule visits that miss. At stride 1.5 L every access visits its
    own granule, so under "L is below the line" (every line touched, the same load) the two
    shares agree (ratio 1); when L reaches the line a third of the lines are skipped, the load
    drops to 3/4 and the ratio falls well below 1 (to 0 for LRU). The array fits when the
    test's misses are not significant or the ratio is below `LINE_RATIO`. Hash-indexed caches
    miss a little even at 3/4 load (some sets still overflow); the ratio absorbs that.
    """
    k, p, significant = still_misses(test_latency, classifier)
    ctrl = classifier.slow(control_latency)
    k_ctrl = int(ctrl.sum())
    control_ok = k_ctrl >= MIN_GRANULE_MISSES
    share_test = k / max(len(test_latency), 1)
    share_ctrl = k_ctrl / max(len(control_latency), 1) * granule_bytes / 4
    ratio = share_test / share_ctrl if share_ctrl > 0 else float("inf")
    fits = control_ok and (not significant or ratio < LINE_RATIO)
    return LineTest(candidate_bytes, k, len(test_latency), p, ratio, fits, control_ok)


def level_latencies(finding: SizeFinding) -> dict[str, float | int | None]:
    """Hit latency (arrays that fit) and miss latency (misses of the arrays past the size)."""
    c = finding.classifier
    i = int(np.searchsorted(finding.sizes_bytes, finding.next_bytes))
    fits = np.concatenate(finding.groups[:i])
    after = np.concatenate(finding.groups[i:])
    misses = after[c.miss(after)]
    med = float(np.median(fits))
    iqr = float(np.subtract(*np.percentile(fits, [75, 25])))
    out: dict[str, float | int | None] = {
        "hit": med,
        "hit_iqr": iqr,
        "hit_n": int(fits.size),
        "miss": None,
        "miss_iqr": None,
        "miss_n": int(misses.size),
    }
    if misses.size:
        out["miss"] = float(np.median(misses))
        out["miss_iqr"] = float(np.subtract(*np.percentile(misses, [75, 25])))
    return out


def size_groups(df: pd.DataFrame) -> tuple[np.ndarray, list[np.ndarray]]:
    """(sizes, latency group per size) of one level's size-search rows."""
    by = df.groupby("array_bytes", sort=True)["latency_cycles"]
    sizes = np.array(sorted(by.groups), dtype=np.int64)
    return sizes, [by.get_group(s).to_numpy(np.float64) for s in sizes]


# --- the stage-1 result document -------------------------------------------------------------

ELEMENTS = {
    ("ca", 1): "l1d",
    ("cg", 1): "l2",
    ("nc", 1): "readonly",
    ("tex", 1): "texture",
    ("const", 1): "constant_l1",
    ("const", 2): "constant_l15",
}
SAME_LEVEL = 0.10  # hit latencies within 10% are one latency level
SIZE_METHOD = (
    "fine-grained P-chase (TPDS Sec. 4.2 step 1): growing arrays at a small stride; the first "
    "size whose slow accesses the timing-outlier rate cannot explain (binomial test), refined "
    "inside its bracket"
)
GRANULE_METHOD = (
    "stride 4 bytes at C + 4 and C + C/8 (TPDS step 2): largest power of two dividing "
    f"{100 * (1 - GRANULE_TOLERANCE):g}% of the missed addresses"
)
LINE_METHOD = (
    "capacity against stride: an array of C + C/8 bytes at stride 1.5 L overflows while L is "
    "below the line (every line touched) and fits once L reaches it (a third of the lines "
    "skipped, 3/4 load): the line is the smallest L whose misses are insignificant or below "
    f"{LINE_RATIO:g} of those of the stride-4 control per granule visit"
)


def _element(path: str, level: int) -> str:
    return ELEMENTS.get((path, level), f"{path}_level{level}")


def analyse_level(df: pd.DataFrame) -> dict:
    """Quantities of one (path, level) from its rows (phases size, granule, line)."""
    from .result import quantity, undetermined

    size_rows = df[df["phase"] == "size"]
    stride = int(size_rows["stride_bytes"].iloc[0]) if len(size_rows) else None
    out: dict = {"size_search_stride_bytes": stride}
    names = (
        "size_bytes",
        "sector_bytes",
        "line_bytes",
        "hit_latency_cycles",
        "miss_latency_cycles",
        "miss_penalty_cycles",
    )
    if size_rows.empty:
        return out | {k: undetermined("no size search in the trace") for k in names}
    sizes, groups = size_groups(size_rows)
    finding = locate_size(sizes, groups)
    hit_ref = finding.classifier.hit_latency_cycles if finding.classifier else None
    out["reference_hit_latency_cycles"] = hit_ref
    if finding.size_bytes is None:
        out |= {k: undetermined(finding.reason) for k in names}
        return out
    c, r, det = finding.size_bytes, finding.detector.result, finding.detector
    i = r.index
    out["size_bytes"] = quantity(
        c,
        unit="bytes",
        confidence=r.confidence,
        method=SIZE_METHOD,
        evidence=(
            f"stride {stride} B; {r.miss_counts[i - 1]}/{r.accesses[i - 1]} slow accesses at "
            f"{c} B, {r.miss_counts[i]}/{r.accesses[i]} at {finding.next_bytes} B (binomial "
            f"p={r.p_value:.2g} against the outlier rate {r.outlier_rate:.2g}); resolution "
            f"{finding.resolution_bytes} B: the size is in [{c}, {finding.next_bytes})"
        ),
    )
    del det
    lat = level_latencies(finding)
    out["hit_latency_cycles"] = quantity(
        round(lat["hit"], 1),
        unit="cycles",
        confidence=1.0 / (1.0 + lat["hit_iqr"] / max(lat["hit"], 1.0)),
        method="median latency of the accesses of the arrays that fit",
        evidence=f"{lat['hit_n']} accesses, IQR {lat['hit_iqr']:.1f} cycles",
    )
    if lat["miss"] is None:
        out["miss_latency_cycles"] = undetermined("no access past the size fell in the miss band")
        out["miss_penalty_cycles"] = undetermined("no miss latency")
    else:
        ev = (
            f"{lat['miss_n']} misses (latency in ({finding.classifier.threshold_cycles:.0f}, "
            f"{finding.classifier.ceiling_cycles:.0f}]), IQR {lat['miss_iqr']:.1f} cycles"
        )
        conf = 1.0 / (1.0 + lat["miss_iqr"] / max(lat["miss"], 1.0))
        out["miss_latency_cycles"] = quantity(
            round(lat["miss"], 1),
            unit="cycles",
            confidence=conf,
            method="median latency of the accesses classified as misses past the size",
            evidence=ev,
        )
        out["miss_penalty_cycles"] = quantity(
            round(lat["miss"] - lat["hit"], 1),
            unit="cycles",
            confidence=conf,
            method="miss latency minus hit latency",
            evidence=ev,
        )
    grain = df[df["phase"] == "granule"]
    g = (
        miss_granule(
            grain["address_bytes"].to_numpy(), finding.classifier.miss(grain["latency_cycles"])
        )
        if len(grain)
        else GranuleFinding(None, 0, 0, 0, "no stride-4 walk in the trace")
    )
    if g.granule_bytes is None:
        out["sector_bytes"] = undetermined(g.reason)
        out["line_bytes"] = undetermined(f"needs the miss granule: {g.reason}")
        return out
    out["sector_bytes"] = quantity(
        g.granule_bytes,
        unit="bytes",
        confidence=1.0 - g.off_granule / g.misses,
        method=GRANULE_METHOD,
        evidence=(
            f"{g.misses} misses at arrays of {sorted(grain['array_bytes'].unique().tolist())} B; "
            f"{g.misses - g.off_granule} on multiples of {g.granule_bytes} B, {g.odd_multiples} "
            f"on odd multiples; {g.off_granule} elsewhere (outliers)"
        ),
    )
    out["line_bytes"] = _line_quantity(df[df["phase"] == "line"], grain, g.granule_bytes, finding)
    return out


def _line_quantity(rows: pd.DataFrame, grain: pd.DataFrame, granule: int, finding) -> dict:
    from .result import quantity, undetermined

    if rows.empty:
        return undetermined(
            "no capacity-against-stride walk in the trace (the test array would exceed the "
            "path's address limit)"
        )
    n_test = int(rows["array_bytes"].iloc[0])
    control = grain[grain["array_bytes"] == n_test]["latency_cycles"].to_numpy()
    n_control = int(np.sum(finding.classifier.slow(control)))
    tried = []
    for stride, grp in rows.groupby("stride_bytes", sort=True):
        line = int(stride) * 2 // 3
        t = line_test(
            grp["latency_cycles"].to_numpy(),
            control,
            finding.classifier,
            candidate_bytes=line,
            granule_bytes=granule,
        )
        tried.append(
            f"stride {int(stride)} B (L={line}): {t.misses}/{t.accesses} slow, p={t.p_value:.2g}, "
            f"ratio to the control {t.ratio:.2f}"
        )
        if not t.control_ok:
            return undetermined(
                f"the stride-4 control at {n_test} B has fewer than {MIN_GRANULE_MISSES} misses: "
                "the test array does not overflow the cache"
            )
        if t.fits:
            return quantity(
                line,
                unit="bytes",
                confidence=float(np.clip(1.0 - 2.0 * min(t.ratio, 0.5), 0.0, 1.0)),
                method=LINE_METHOD,
                evidence=(
                    f"array {n_test} B, control: stride 4 ({n_control}/{control.size} slow); "
                    + "; ".join(tried)
                    + f"; miss granule {granule} B"
                ),
            )
    return undetermined(
        "every stride tried still misses (" + "; ".join(tried) + "): the line is longer than "
        "the largest tried, or the set mapping defeats the test"
    )


def analyse(data: pd.DataFrame, *, provenance: dict, inputs: dict | None = None) -> dict:
    """The `cache_stage1` result document for one device."""
    from .result import undetermined

    params = provenance.get("config", {}).get("parameters", {}) or {}
    enabled = [p for p, e in (params.get("paths") or {}).items() if e.get("enabled", True)]
    paths: dict = {}
    for path in dict.fromkeys(list(data["path"].unique()) + enabled):
        rows = data[data["path"] == path]
        if rows.empty:
            paths[path] = {"measured": False, "reason": "the device has no such load path"}
            continue
        levels = []
        for level, df in rows.groupby("level", sort=True):
            q = analyse_level(df)
            levels.append({"level": int(level), "element": _element(path, int(level))} | q)
        paths[path] = {"measured": True, "levels": levels}
    _name_by_latency_level(paths)
    elements: dict = {}
    for path, entry in paths.items():
        for lv in entry.get("levels", []):
            served = lv.get("served_by")
            if served:
                reason = (
                    f"the {path} path is served at the {served} latency level "
                    f"({lv['reference_hit_latency_cycles']:.0f} cycles): no {lv['element']} "
                    "caches it"
                )
                elements.setdefault(lv["element"], {"path": path, "level": lv["level"]})
                elements[lv["element"]] |= {"served_by": served, "note": reason}
                continue
            keys = [k for k in lv if k.endswith(("_bytes", "_cycles")) and isinstance(lv[k], dict)]
            elements[lv["element"]] = {"path": path, "level": lv["level"]} | {
                k: lv[k] for k in keys
            }
    for el in elements.values():
        if "note" in el:
            for k in ("size_bytes", "line_bytes", "sector_bytes", "hit_latency_cycles"):
                el.setdefault(k, undetermined(el["note"]))
    carve = sorted(set(data["carveout_pct"].astype(int))) if len(data) else []
    return {
        "device": provenance["device"],
        "analysis": "cache_stage1",
        "trace": {k: provenance.get(k) for k in ("git_commit", "config_hash", "created_utc")},
        "device_info": provenance.get("device_info", {}),
        "backend": provenance.get("backend"),
        "clocks_before": provenance.get("clocks_before"),
        "clocks_after": provenance.get("clocks_after"),
        "carveout_pct": None if not carve or carve == [-1] else carve,
        "shared_buffer_bytes": (int(data["shared_buffer_bytes"].iloc[0]) if len(data) else None),
        "paths": paths,
        "elements": elements,
        "naming_rule": (
            "ca -> l1d, cg -> l2, nc -> readonly, tex -> texture, const -> constant_l1 then "
            "constant_l15; a path whose first level hits within 10% of the cg path's hit "
            "latency is served by the L2 (no cache of its own on that path)"
        ),
    }


def _name_by_latency_level(paths: dict) -> None:
    cg = paths.get("cg", {}).get("levels", [])
    l2_hit = cg[0].get("reference_hit_latency_cycles") if cg else None
    if not l2_hit:
        return
    for path, entry in paths.items():
        if path == "cg" or not entry.get("levels"):
            continue
        first = entry["levels"][0]
        hit = first.get("reference_hit_latency_cycles")
        if hit is not None and abs(hit - l2_hit) <= SAME_LEVEL * l2_hit:
            first["served_by"] = "l2"
