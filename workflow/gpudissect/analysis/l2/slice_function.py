"""The L2 address-to-slice function from the slice classes of `l2_slices` (the lines that
contend for one atomic unit), and the contiguous-buffer capacity the function's balance allows.

1. The linear part over GF(2): the masks over the sampled region's address bits whose parity
   is constant within every class, up to `LINEAR_TOLERANCE` of the lines (every mask's
   misplaced lines from one Walsh-Hadamard transform per class: a class's lines of parity 1
   under mask m are (n - W(m)) / 2). The function is "xor" (linear) only where the linear
   part's syndromes separate every class (as many distinct syndromes as classes); otherwise
   "not linear", with how many groups the linear part separates and the misplaced lines of
   the best mask outside it against the mean of every mask outside it.
2. A table over a period: class membership periodic in the line address with period P lines
   (the pairs of sampled lines P, 2P, ... lines apart lie in one class, at least
   `PERIOD_AGREEMENT` of at least `MIN_PERIOD_PAIRS` pairs); the smallest such P. A period
   whose residues each hold one class and whose classes each hold one residue is "modulo"
   (slice = line mod P, up to relabelling). A linear function over bits 7..k has the period
   2^(k-6) lines, so a period is reported beside a linear verdict too; without one, every
   period up to half the region is ruled out, with the best agreement found.
3. The contiguous capacity: where the function is known on every line (linear, or a period
   whose every residue was sampled), the per-slice load of a buffer from the region's start
   gives the largest buffer whose lines fit in every slice (per-slice capacity = the driver's
   L2 size / the slice count, slices of equal size); otherwise the sampled classes' sizes
   only bound the imbalance, and the capacity is undetermined with those bounds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..common.gf2 import Basis
from ..common.gf2 import labels as syndromes
from ..common.result import not_applicable, quantity, undetermined

LINEAR_TOLERANCE = 0.005  # share of the lines a mask of the linear part may misplace
PERIOD_AGREEMENT = 0.95  # share of the pairs a period apart that must lie in one class
MIN_PERIOD_PAIRS = 10  # pairs a period needs (a random function: one class in `classes`)
MAX_REGION_BITS = 20  # masks over at most this many address bits (2^20 masks per class)


@dataclass(frozen=True)
class SliceFunction:
    """What the classes show: the linear part and its syndromes, the best mask outside it,
    the period (or the best agreement of any), the verdict."""

    bits: list[int]
    linear_masks: list[int]
    syndrome_groups: int
    classes: int
    lines: int
    best_extra_mask: int | None
    best_extra_misplaced: int | None
    random_mean_misplaced: float | None
    period_lines: int | None
    period_agreement: float
    period_pairs: int
    best_period_lines: int | None
    largest_period_tested: int
    modulo: bool
    residues_covered: int | None

    @property
    def linear(self) -> bool:
        return self.syndrome_groups == self.classes

    @property
    def kind(self) -> str:
        if self.linear:
            return "xor"
        if self.period_lines is not None:
            return "modulo" if self.modulo else "table"
        return "not_linear"


def region_bits(offsets_bytes: np.ndarray) -> list[int]:
    """The address bits the sampled offsets span: from the line bit (the lowest bit in which
    two offsets differ) to the highest bit of the largest offset."""
    o = np.asarray(offsets_bytes, dtype=np.int64)
    diff = np.bitwise_or.reduce(o ^ o[0]) if o.size else 0
    if diff == 0:
        return []
    low = (int(diff) & -int(diff)).bit_length() - 1
    return list(range(low, int(o.max()).bit_length()))


def _walsh(values: np.ndarray) -> np.ndarray:
    """The Walsh-Hadamard transform of one vector of length 2^k (natural order)."""
    v = values.astype(float).copy()
    h = 1
    while h < v.size:
        v = v.reshape(-1, 2, h)
        v = np.stack([v[:, 0] + v[:, 1], v[:, 0] - v[:, 1]], axis=1).reshape(-1)
        h *= 2
    return v


def misplaced_by_mask(offsets_bytes, labels, bits: list[int]) -> np.ndarray:
    """Lines each mask misplaces (index m: the mask of bits[j] for each set bit j of m): per
    class, the lines in the minority parity, summed over the classes."""
    o = np.asarray(offsets_bytes, dtype=np.int64)
    lab = np.asarray(labels)
    x = np.zeros(o.size, dtype=np.int64)
    for j, b in enumerate(bits):
        x |= ((o >> b) & 1) << j
    out = np.zeros(1 << len(bits))
    for k in np.unique(lab):
        counts = np.bincount(x[lab == k], minlength=1 << len(bits))
        out += (counts.sum() - np.abs(_walsh(counts))) / 2
    return np.rint(out).astype(np.int64)


def _mask(index: int, bits: list[int]) -> int:
    return sum(1 << b for j, b in enumerate(bits) if index >> j & 1)


def period_agreement(lines: np.ndarray, labels, largest: int) -> tuple[np.ndarray, np.ndarray]:
    """For every period P in 1..largest lines: (pairs of sampled lines a multiple of P apart,
    of which in one class). Pairs by distance are autocorrelations of the lines' indicator
    (all lines, and each class's, summed), by FFT; then summed over the multiples of P."""
    line = np.asarray(lines, dtype=np.int64)
    lab = np.asarray(labels)
    line = line - line.min()
    span = int(line.max()) + 1
    size = 1 << int(2 * span - 1).bit_length()

    def autocorrelation(power: np.ndarray) -> np.ndarray:
        return np.rint(np.fft.irfft(power, size)[:span]).astype(np.int64)

    occupancy = np.zeros(size)
    np.add.at(occupancy, line, 1)
    pairs = autocorrelation(np.abs(np.fft.rfft(occupancy)) ** 2)
    power = np.zeros(size // 2 + 1)
    for k in np.unique(lab):
        v = np.zeros(size)
        np.add.at(v, line[lab == k], 1)
        power += np.abs(np.fft.rfft(v)) ** 2
    same = autocorrelation(power)
    total, agree = np.zeros(largest + 1, np.int64), np.zeros(largest + 1)
    for p in range(1, largest + 1):
        total[p] = pairs[p::p].sum()
        agree[p] = same[p::p].sum()
    return total, agree


def _span_of(masks: list[int], bits: list[int]) -> np.ndarray:
    """Boolean over the mask indices (bit j of an index: address bit bits[j]): which lie in
    the span of `masks`."""
    pos = {b: j for j, b in enumerate(bits)}
    members = np.zeros(1, dtype=np.int64)
    for m in masks:
        index = sum(1 << pos[b] for b in bits if m >> b & 1)
        members = np.concatenate([members, members ^ index])
    out = np.zeros(1 << len(bits), dtype=bool)
    out[members] = True
    return out


def solve(offsets_bytes, labels) -> SliceFunction:
    """The linear part, best extra mask, period and verdict of the classes `labels` of the
    lines at `offsets_bytes` (one sampled region, offsets from its aligned start)."""
    o = np.asarray(offsets_bytes, dtype=np.int64)
    lab = np.unique(np.asarray(labels), return_inverse=True)[1]
    bits = region_bits(o)
    if len(bits) > MAX_REGION_BITS:
        raise ValueError(
            f"the sampled lines span {len(bits)} address bits; at most {MAX_REGION_BITS} allowed"
        )
    classes, n = int(lab.max()) + 1, int(o.size)
    mis = misplaced_by_mask(o, lab, bits)
    tol = LINEAR_TOLERANCE * n
    basis = Basis(_mask(int(m), bits) for m in np.flatnonzero(mis <= tol) if m)
    masks = basis.vectors
    syn = syndromes(masks, o) if masks else np.zeros(n, np.int64)
    # each class's majority syndrome; groups = distinct syndromes over the classes
    major = [int(np.bincount(syn[lab == k]).argmax()) for k in range(classes)]
    groups = len(set(major))
    outside = ~_span_of(masks, bits)
    best = mean = None
    if outside.any():
        idx = np.flatnonzero(outside)
        b = int(idx[np.argmin(mis[idx])])
        best, mean = (_mask(b, bits), int(mis[b])), float(mis[idx].mean())
    line_bit = bits[0] if bits else 0
    line = o >> line_bit
    largest = max(1, (int(line.max() - line.min()) + 1) // 2) if n else 1
    total, agree = period_agreement(line, lab, largest)
    share = np.where(total > 0, agree / np.maximum(total, 1), 0.0)
    ok = np.flatnonzero((total >= MIN_PERIOD_PAIRS) & (share >= PERIOD_AGREEMENT))
    ok = ok[ok > 1]
    tested = np.flatnonzero(total >= MIN_PERIOD_PAIRS)
    tested = tested[tested > 1]
    period = int(ok[0]) if ok.size else None
    best_p = int(tested[np.argmax(share[tested])]) if tested.size else None
    modulo, covered = False, None
    if period is not None:
        res = line % period
        covered = int(np.unique(res).size)
        one_class = all(np.unique(lab[res == r]).size == 1 for r in np.unique(res))
        one_res = all(np.unique(res[lab == k]).size == 1 for k in range(classes))
        modulo = one_class and one_res and covered == period == classes
    p_report = period if period is not None else best_p
    return SliceFunction(
        bits=bits,
        linear_masks=masks,
        syndrome_groups=groups,
        classes=classes,
        lines=n,
        best_extra_mask=None if best is None else best[0],
        best_extra_misplaced=None if best is None else best[1],
        random_mean_misplaced=mean,
        period_lines=period,
        period_agreement=float(share[p_report]) if p_report else 0.0,
        period_pairs=int(total[p_report]) if p_report else 0,
        best_period_lines=best_p,
        largest_period_tested=int(tested.max()) if tested.size else 0,
        modulo=modulo,
        residues_covered=covered,
    )


def slice_of_lines(f: SliceFunction, offsets_bytes, labels, lines: np.ndarray) -> np.ndarray:
    """The class of every line number in `lines` (from the region's start), where the function
    is known on all of them (linear, or a period whose every residue was sampled); else None."""
    o = np.asarray(offsets_bytes, dtype=np.int64)
    lab = np.unique(np.asarray(labels), return_inverse=True)[1]
    line_bit = f.bits[0]
    if f.linear:
        syn = syndromes(f.linear_masks, o)
        # each class's majority syndrome (a line the classes misplaced does not relabel one)
        relabel = {int(np.bincount(syn[lab == k]).argmax()): k for k in range(f.classes)}
        got = syndromes(f.linear_masks, np.asarray(lines, np.int64) << line_bit)
        return np.array([relabel.get(int(s), -1) for s in got], dtype=np.int64)
    if f.period_lines is not None and f.residues_covered == f.period_lines:
        table = np.zeros(f.period_lines, dtype=np.int64)
        table[(o >> line_bit) % f.period_lines] = lab
        return table[np.asarray(lines, np.int64) % f.period_lines]
    return None


def elements(
    offsets_bytes, labels, *, slices: int | None, driver_l2_bytes: int | None
) -> dict[str, Any]:
    """The `l2` quantities: `slice_function`, `slice_linear_masks`, `slice_period_bytes` and
    `predicted_contiguous_size_bytes` (module docstring)."""
    f = solve(offsets_bytes, labels)
    line_bytes = 1 << f.bits[0]
    hexes = [hex(m) for m in f.linear_masks]
    lin = (
        f"linear part over address bits {f.bits[0]}-{f.bits[-1]}: {len(hexes)} masks {hexes} "
        f"(each misplaces at most {LINEAR_TOLERANCE:.1%} of the {f.lines} lines); its syndromes "
        f"separate {f.syndrome_groups} groups of the {f.classes} classes"
    )
    if f.best_extra_mask is not None:
        lin += (
            f"; the best mask outside it, {hex(f.best_extra_mask)}, misplaces "
            f"{f.best_extra_misplaced} lines, every mask outside it {f.random_mean_misplaced:.1f} "
            "on average"
        )
    per = (
        f"period: smallest P with at least {PERIOD_AGREEMENT:.0%} of at least {MIN_PERIOD_PAIRS} "
        f"pairs of lines a multiple of P lines apart in one class, P = 2-"
        f"{f.largest_period_tested} lines tested"
    )
    if f.period_lines is not None:
        per += (
            f"; P = {f.period_lines} lines ({f.period_pairs} pairs, {f.period_agreement:.1%} "
            f"agree; {f.residues_covered} of its residues sampled)"
        )
    else:
        per += (
            f"; none: the best, P = {f.best_period_lines} lines, puts {f.period_agreement:.1%} "
            f"of its {f.period_pairs} pairs in one class"
        )
    evidence = f"{lin}; {per}"
    method = (
        "the slice classes' lines: masks over GF(2) whose parity is constant in every class "
        "(Walsh-Hadamard transform per class), and periodicity of class membership in the line "
        "address"
    )
    value: dict[str, Any] = {"kind": f.kind}
    if f.kind == "xor":
        value |= {"masks": hexes}
        conf = 1.0
    else:
        value |= {"linear_masks": hexes}
        if f.period_lines is not None:
            value |= {"period_bytes": f.period_lines * line_bytes}
        # a linear function would need every class to hold lines the best extra mask splits
        conf = min(1.0, (f.best_extra_misplaced or 0) / max(1.0, 10 * LINEAR_TOLERANCE * f.lines))
        if f.period_lines is not None:
            conf = f.period_agreement
    out: dict[str, Any] = {
        "slice_function": quantity(value, unit=None, confidence=conf, method=method,
                                   evidence=evidence),
        "slice_linear_masks": quantity(hexes, unit=None, confidence=1.0, method=method,
                                       evidence=lin),
    }  # fmt: skip
    if f.period_lines is not None:
        out["slice_period_bytes"] = quantity(
            f.period_lines * line_bytes,
            unit="bytes",
            confidence=f.period_agreement,
            method=method,
            evidence=per,
        )
    else:
        out["slice_period_bytes"] = not_applicable(f"no period: {per}")
    out["predicted_contiguous_size_bytes"] = contiguous_capacity(
        f, offsets_bytes, labels, slices=slices, driver_l2_bytes=driver_l2_bytes
    )
    return out


def _balance(labels, classes: int) -> str:
    """How far the sampled classes' sizes are from equal loads (chi-square against a uniform
    spread over the classes), and the excess of one slice the sample could see."""
    from scipy.stats import chi2

    sizes = np.bincount(np.unique(np.asarray(labels), return_inverse=True)[1])
    mean = float(sizes.mean())
    stat = float(((sizes - mean) ** 2).sum() / mean)
    p = float(chi2.sf(stat, classes - 1)) if classes > 1 else 1.0
    return (
        f"the sampled classes hold {int(sizes.min())}-{int(sizes.max())} lines (mean "
        f"{mean:.1f}); chi-square against equal loads {stat:.1f} on {classes - 1} degrees of "
        f"freedom (p = {p:.2f}); one class's count varies by +-{100 / np.sqrt(mean):.0f}% (one "
        "SD) by sampling alone, so the sample cannot see a slice loaded a few percent above "
        "the others"
    )


def contiguous_capacity(f, offsets_bytes, labels, *, slices, driver_l2_bytes) -> dict[str, Any]:
    """The largest contiguous buffer (from the region's start) whose lines fit in every slice,
    each slice holding driver_l2_bytes / slices, or undetermined (module docstring, 3)."""
    line_bytes = 1 << f.bits[0]
    if not driver_l2_bytes:
        return undetermined("the trace records no driver L2 size to divide among the slices")
    if not slices:
        return undetermined("the slice count is undetermined")
    if f.classes != slices:
        return undetermined(f"{f.classes} classes against {slices} slices")
    cap = driver_l2_bytes // slices // line_bytes  # lines one slice holds
    total = driver_l2_bytes // line_bytes
    period = None
    if f.linear:
        period = 1 << len(f.bits)  # the region: beyond it, higher bits add a constant
    elif f.period_lines is not None and f.residues_covered == f.period_lines:
        period = f.period_lines
    if period is None:
        return undetermined(
            f"the function is known only on the sampled lines ({f.kind}, no period whose every "
            f"residue was sampled): {_balance(labels, f.classes)}"
        )
    one = slice_of_lines(f, offsets_bytes, labels, np.arange(period))
    if (one < 0).any():
        return undetermined(
            f"the linear part has {1 << len(f.linear_masks)} syndromes, the sample met "
            f"{f.classes}: the lines of the others have no class"
        )
    counts = np.bincount(one, minlength=slices)
    # the (cap + 1)-th line of each slice: the buffer must stop before the first of them
    first_over = []
    for k in range(slices):
        at = np.flatnonzero(one == k)
        if at.size == 0:
            continue
        q, r = divmod(cap, at.size)
        first_over.append(q * period + int(at[r]))
    lines = min(first_over)
    method = (
        "per-slice load of a contiguous buffer from the region's start under the function "
        f"found ({f.kind}), each slice holding the driver's L2 size / {slices} slices"
    )
    evidence = (
        f"per slice {cap * line_bytes} B ({cap} lines); over one period of {period} lines the "
        f"slices get {int(counts.min())}-{int(counts.max())} lines (mean "
        f"{counts.mean():.2f}); the first slice to overflow does at line {lines} of "
        f"{total} (the driver's size)"
    )
    return quantity(
        lines * line_bytes, unit="bytes", confidence=1.0, method=method, evidence=evidence
    )


def driver_l2_bytes(device_info: dict[str, Any]) -> int | None:
    """The L2 size the driver reports, as the trace's metadata records it (CUDA attribute
    `l2_cache_size`, or a `facts` entry `l2_cache_size_bytes`)."""
    got = (device_info.get("attributes") or {}).get("l2_cache_size")
    got = got or (device_info.get("facts") or {}).get("l2_cache_size_bytes")
    return int(got) if got else None


def add_slice_elements(l2: dict[str, Any], offsets_bytes, labels, device_info) -> None:
    """Into `l2`: the slice function's quantities, where the slice count is determined (else
    each undetermined with the count's reason)."""
    names = ("slice_function", "slice_linear_masks", "slice_period_bytes")
    names += ("predicted_contiguous_size_bytes",)
    count = l2.get("slices", {}).get("value")
    if count is None:
        why = f"the slice classes are not slices: {l2.get('slices', {}).get('undetermined')}"
        l2.update({k: undetermined(why) for k in names})
        return
    l2.update(
        elements(
            offsets_bytes, labels, slices=int(count), driver_l2_bytes=driver_l2_bytes(device_info)
        )
    )
