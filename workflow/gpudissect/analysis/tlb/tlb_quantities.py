"""Quantities of the `tlbs` result document (TPDS Sec. 4.4, Table V; assembled by
`tlb_document`): the latency levels, a level's miss penalty, its entries, sets and ways as the
result contract names them, and the pages stage's rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..common.result import quantity, undetermined
from .tlb_sets import SetStructure

METHOD_PAGE = (
    "fine-grained P-chase at strides around the page (TPDS Sec. 4.4): spacing of TLB misses "
    "past the L1-TLB reach; first-miss array size N*(s) as corroboration"
)
METHOD_SETS = (
    "misses per traversal as the walk grows by one page past the reach (TPDS Fig. 10): each "
    "increment > 1 is one more set overflowing"
)


def levels_doc(levels, b, l1, l2) -> dict[str, Any]:
    names = {b: "base", l1: "l1_tlb_miss", l2: "l2_tlb_miss"}
    return {
        names.get(k, f"level_{k}"): {"latency_cycles": lev.center, "samples": lev.count}
        for k, lev in enumerate(levels)
    }


def penalty(levels, lo, hi, df, what: str, parts: tuple[float, ...] = ()) -> dict[str, Any]:
    if lo is None or hi is None:
        return undetermined(f"no {what} level found")
    pen = levels[hi].center - levels[lo].center
    together = (
        f"; the levels at {', '.join(f'{c:.0f}' for c in parts)} cycles set in together and are "
        "taken as one miss level (their pooled median)"
        if parts
        else ""
    )
    return quantity(
        round(pen, 1),
        unit="cycles",
        confidence=min(1.0, min(levels[hi].count, levels[lo].count) / 50),
        method="difference of the median latencies of two levels of the stride = page walks",
        evidence=(
            f"{what}: level {levels[hi].center:.0f} cycles ({levels[hi].count} accesses) minus "
            f"{levels[lo].center:.0f} ({levels[lo].count}){together}"
        ),
    )


def structure_quantities(st: SetStructure, page: int, *, unit_note: str) -> dict[str, Any]:
    q: dict[str, Any] = {}
    if st.entries is None:
        q["entries"] = undetermined(st.evidence)
    else:
        q["entries"] = quantity(
            st.entries,
            unit="entries",
            confidence=0.95,
            method="largest walk of one element per page with no miss of this level",
            evidence=f"{st.entries} pages of {page} bytes fit ({st.entries * page} bytes "
            f"reach){unit_note}",
        )
    for key, value in (
        ("sets", st.sets),
        ("ways_per_set", None if st.ways is None else list(st.ways)),
    ):
        q[key] = (
            undetermined(st.evidence)
            if value is None
            else quantity(
                value, unit=None, confidence=st.confidence, method=METHOD_SETS, evidence=st.evidence
            )
        )
    q["policy"] = (
        undetermined(st.evidence)
        if st.policy is None
        else quantity(
            st.policy,
            unit=None,
            confidence=st.confidence * (0.8 if st.policy == "lru" else 1.0),
            method="periodicity of the misses of a cyclic walk (TPDS Sec. 4.2 step 4)",
            evidence=st.evidence
            + ("; a cyclic walk cannot tell FIFO from LRU" if st.policy == "lru" else ""),
        )
    )
    return q


def pages_rows(walks) -> list[dict[str, Any]]:
    if walks is None:
        return []
    return walks.counts.replace({np.nan: None}).to_dict("records")
