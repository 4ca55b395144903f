"""Stage 2 of the two-stage fine-grained P-chase (Mei & Chu, TPDS Sec. 4.2 steps 3-4, Fig. 6;
NPC 2014 Sec. 3 (3)): sets, ways per set (unequal sets included) and the set-index function of
one cache, from arrays that overflow it line by line. Sees only traces.

At stride b (one access per line) an array of C + k b bytes holds k lines more than the cache.
A set overflows when it has one line more than ways; from then on its lines miss on every pass
(LRU, FIFO) or now and then (random replacement), while the lines of the other sets hit. So the
lines that start to miss together at one k are the members of one set (TPDS Fig. 10, NPC Fig.
11 for the L2 TLB): that burst holds ways + 1 lines. A new line that joins an already
overflowing set adds one missing line (itself). The number of bursts once every line misses is
the number of sets; their sizes less one the ways of each (unequal sets show as unequal bursts).

A line's onset is the first k at which it misses and after which it misses at most later k
(80%): a timing outlier on a hit does not make a line a member, and a randomly replaced member
that did not happen to miss at its onset is caught by the passes at that k (the sweep records
enough passes per k for a random policy: see experiments/caches.py).

Set-index bits: with every line labelled by its set, an address bit is part of a bit-defined
index if flipping it always changes the set, and not part of it if it never does; the index is
bit-defined when exactly log2(sets) bits always change it and the rest never. Otherwise the
mapping is reported as not bit-defined, with the bits it depends on and whether the partition
is XOR-linear (a hash of address bits, as on the Fermi L1 and the Kepler read-only cache).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..common.misses import _MAD_TO_SIGMA, FirstMissDetector, binom_sf
from .level_size import Classifier

LINE_ALPHA = 1e-3  # significance of a line's misses at one k against the outlier rate
PERSISTENCE = 0.8  # share of later k at which a member keeps missing
COMPLETE = 0.99  # share of lines with an onset that counts as "every line misses"
# the columns `line_miss_table` reads, in the order `line_miss_counts` takes them
LINE_MISS_COLUMNS = ("extra_lines", "address_bytes", "latency_cycles")


def reference_classifier(latency: np.ndarray) -> Classifier:
    """Hit level and miss threshold from accesses that all hit (FirstMissDetector's rule)."""
    det = FirstMissDetector()
    ref = np.asarray(latency, dtype=np.float64)
    hit = float(np.median(ref))
    sigma = _MAD_TO_SIGMA * float(np.median(np.abs(ref - hit)))
    threshold = hit + max(6.0 * sigma, det.min_margin_cycles, det.min_relative_margin * hit)
    rate = (np.sum(ref > threshold) + 1.0) / (ref.size + 2.0)
    return Classifier(hit, float(threshold), float(rate))


def line_miss_table(rows: pd.DataFrame, classifier: Classifier, line_bytes: int) -> pd.DataFrame:
    """Per (extra_lines k, line), in that order: accesses and misses, pooled over a k's
    launches. (Counted with numpy sorts: the caches sweep reads this table after every
    launch of its sets phase, where a pandas group-by cost more than the launch.)"""
    return line_miss_counts(
        *(rows[c].to_numpy() for c in LINE_MISS_COLUMNS), classifier, line_bytes
    )


def line_miss_counts(
    extra_lines: np.ndarray,
    address_bytes: np.ndarray,
    latency_cycles: np.ndarray,
    classifier: Classifier,
    line_bytes: int,
) -> pd.DataFrame:
    """`line_miss_table` of the accesses given as arrays (the sweep keeps its launches so)."""
    k = extra_lines
    line = address_bytes // line_bytes
    miss = classifier.slow(latency_cycles)
    order = np.lexsort((line, k))
    k, line, miss = k[order], line[order], miss[order].astype(np.int64)
    first = np.flatnonzero(np.r_[True, (k[1:] != k[:-1]) | (line[1:] != line[:-1])])
    if not len(k):
        first = first[:0]
    size = np.diff(np.r_[first, len(k)]).astype(np.int64)
    total = np.add.reduceat(miss, first) if len(k) else miss[:0]
    # a line misses at k when its slow accesses there are more than timing outliers explain
    # (the test asked only of lines with two slow accesses or more: most lines have none)
    missing = total == size
    tested = np.flatnonzero((total >= 2) & ~missing)
    p = binom_sf(total[tested] - 1, size[tested], classifier.outlier_rate)
    missing[tested] = p < LINE_ALPHA
    return pd.DataFrame(
        {"k": k[first], "line": line[first], "size": size, "sum": total, "missing": missing}
    )


@dataclass
class SetStructure:
    """Result of `find_sets`: bursts (one per set found), labels and the checks."""

    base_lines: int  # C / b
    last_k: int
    complete: bool  # every line of the last arrays missed: every set overflowed
    bursts: list[tuple[int, tuple[int, ...]]] = field(default_factory=list)  # (k, lines)
    joined: list[int] = field(default_factory=list)  # k whose new line joined a full set
    anomalies: list[str] = field(default_factory=list)
    labels: dict[int, int] = field(default_factory=dict)  # line -> set id (burst order)

    @property
    def ways(self) -> list[int]:
        return [len(lines) - 1 for _, lines in self.bursts]


def onsets(table: pd.DataFrame) -> dict[int, int]:
    """line -> onset k (see module docstring); lines that never persistently miss are absent."""
    missed = table.pivot(index="line", columns="k", values="missing").fillna(False).to_numpy()
    missed = missed.astype(bool)
    present = table.pivot(index="line", columns="k", values="size").notna().to_numpy(bool)
    lines = np.array(sorted(table["line"].unique()))
    # for every line and k at once: the share of the line's present k from this one on at
    # which it missed (a division of whole counts, the value `mean` of those k gives)
    hit_now = missed & present
    later_missed = np.cumsum(hit_now[:, ::-1], axis=1)[:, ::-1]
    later_present = np.cumsum(present[:, ::-1], axis=1)[:, ::-1]
    with np.errstate(invalid="ignore", divide="ignore"):
        share = later_missed / later_present
    onset = hit_now & (share >= PERSISTENCE)
    rows = np.flatnonzero(onset.any(axis=1))
    if not rows.size:
        return {}
    first = onset[rows].argmax(axis=1)
    ks = np.array(sorted(table["k"].unique()))
    return {int(lines[r]): int(ks[j]) for r, j in zip(rows, first, strict=True)}


def find_sets(table: pd.DataFrame, *, base_lines: int) -> SetStructure:
    """Bursts of lines that start missing together, one per set (see module docstring)."""
    ks = sorted(int(k) for k in table["k"].unique() if k > 0)
    start = onsets(table[table["k"] > 0])
    by_k: dict[int, list[int]] = {}
    for line, k in start.items():
        by_k.setdefault(k, []).append(line)
    last = ks[-1] if ks else 0
    final = table[table["k"] == last]
    complete = bool(len(final)) and float(np.mean(final["missing"])) >= COMPLETE
    s = SetStructure(base_lines=base_lines, last_k=last, complete=complete)
    for k in ks:
        burst = sorted(by_k.get(k, []))
        new_line = base_lines + k - 1
        if len(burst) >= 2:
            if new_line not in burst:
                s.anomalies.append(f"k={k}: {len(burst)} lines started missing, not the new one")
            for line in burst:
                s.labels[line] = len(s.bursts)
            s.bursts.append((k, tuple(burst)))
        elif burst == [new_line]:
            s.joined.append(k)
        elif burst:
            s.anomalies.append(f"k={k}: line {burst[0]} started missing alone (not the new line)")
    return s


def deterministic(table_k: pd.DataFrame) -> bool:
    """At one k: every missing line misses on every pass (LRU/FIFO-like behaviour); lines with
    only outlier-like slow accesses do not count."""
    share = table_k["sum"] / table_k["size"]
    return bool(np.all(share[table_k["missing"]] >= 0.95))


@dataclass(frozen=True)
class IndexBits:
    bits: list[int] | None  # bit-defined: the address bits; else None
    relevant: list[int]  # bits whose flip changes the set at least sometimes
    always: list[int]  # bits whose flip always changes the set
    xor_linear: bool | None  # the partition is a coset partition (XOR of address bits)
    tested_bits: list[int]


def index_bits(labels: dict[int, int], *, line_bytes: int, sets: int) -> IndexBits:
    """Which address bits select the set (see module docstring)."""
    lines = np.array(sorted(labels))
    lab = np.full(int(lines.max()) + 1, -1)
    lab[lines] = [labels[int(n)] for n in lines]
    shift = line_bytes.bit_length() - 1
    relevant, always, tested = [], [], []
    for j in range(int(lines.max()).bit_length()):
        partner = lines ^ (1 << j)
        ok = partner < lab.size
        ok[ok] &= lab[partner[ok]] >= 0
        if not ok.any():
            continue
        tested.append(j + shift)
        differ = lab[lines[ok]] != lab[partner[ok]]
        if differ.any():
            relevant.append(j + shift)
        if differ.all():
            always.append(j + shift)
    m = sets.bit_length() - 1
    bit_defined = (
        sets == 1 << m and sorted(relevant) == sorted(always) and len(always) == m and m > 0
    )
    return IndexBits(
        bits=sorted(always) if bit_defined else None,
        relevant=relevant,
        always=always,
        xor_linear=_xor_linear(lab),
        tested_bits=tested,
    )


def _xor_linear(lab: np.ndarray) -> bool | None:
    """Whether the labelled prefix [0, 2^m) splits into cosets of the class of line 0."""
    n = 1 << (int(np.sum(np.cumprod(lab >= 0))).bit_length() - 1)
    if n < 4:
        return None
    lab = lab[:n]
    kernel = np.flatnonzero(lab == lab[0])
    for r in range(n):
        if not np.all(lab[r ^ kernel] == lab[r]):
            return False
    return True
