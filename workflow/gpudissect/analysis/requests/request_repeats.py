"""Agreement of repeated Thread-Latency sweeps (the `requests` family's `repeat` column).

One sweep of Listing 1 reads one saturation point (or none) per pattern and N; on a real GPU a
single pass may read a spike that the next pass does not see. Every repeat is fitted on its own;
a sweep's **reading** is what the classifier uses of it: the saturation point (last thread count
before the rise, and the next one) and the merge-overflow points. A reading **repeats** when more
than half of the repeats that measured the sweep read it exactly (the first repeats measure
every sweep, later ones only the sweeps still unsettled); only repeating readings go on to the
MSHR/PRT classifier, and a sweep whose readings have no majority is undetermined, with the
readings. The scoreboard limit is read the same way. Sees only fitted sweeps.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..common.result import undetermined
from .request_table import SweepResult

SweepKey = tuple[str, int, int]  # (pattern, merge threads K, loads per thread N)
LIMIT = "per_warp_limit"  # the key of the scoreboard reading among a repeat's readings


def sweep_reading(s: SweepResult) -> tuple:
    """What the classifier uses of one fitted sweep: (saturation threads, next threads) or None,
    and the merge-overflow thread counts."""
    sat = None if s.saturation is None else (s.saturation.threads, s.saturation.next_threads)
    overflow = tuple(p.threads for p in s.spikes if p.kind == "merge_overflow")
    return (sat, overflow)


def limit_reading(q: dict[str, Any]) -> tuple:
    """The scoreboard quantity as a reading: (value, at least)."""
    return (q.get("value"), q.get("at_least"))


def describe(reading: Hashable, *, max_threads: int | None = None) -> str:
    """A reading in words, as the report and the evidence name it."""
    if isinstance(reading, tuple) and len(reading) == 2 and isinstance(reading[1], tuple):
        sat, overflow = reading
        text = (
            f"{sat[0]}->{sat[1]} threads"
            if sat is not None
            else f"none up to {max_threads}"
            if max_threads
            else "none"
        )
        if overflow:
            text += f", merge overflow after {list(overflow)}"
        return text
    value, at_least = reading  # type: ignore[misc]
    return str(value) if value is not None else f"at least {at_least}"


def majority(readings: Sequence[Hashable]) -> tuple[Hashable, int] | None:
    """The reading more than half of `readings` hold, with how many hold it; None if none
    does."""
    if not readings:
        return None
    value, count = Counter(readings).most_common(1)[0]
    return (value, count) if 2 * count > len(readings) else None


def unsettled(
    readings: Sequence[dict[Hashable, Hashable]], max_repeats: int | None = None
) -> set[Hashable]:
    """The sweeps (and the scoreboard, key `LIMIT`) whose outcome more repeats could still
    change. `readings`: one dict per repeat, as `requests` fits it, holding the keys that repeat
    measured (a repeat after the first ones measures only what is still unsettled). A key is
    settled when more than half of the repeats that measured it read it alike or, given
    `max_repeats`, when it can no longer get there: its most common reading stays at most half
    even if every repeat still allowed (`max_repeats` less the repeats so far) read it (a
    reading that does not repeat is then reported so, whenever the repeats stop)."""
    left = None if max_repeats is None else max_repeats - len(readings)
    out: set[Hashable] = set()
    for key in dict.fromkeys(k for r in readings for k in r):
        values = [r[key] for r in readings if key in r]
        if majority(values) is not None:
            continue
        best = Counter(values).most_common(1)[0][1]
        if left is None or 2 * (best + left) > len(values) + left:
            out.add(key)
    return out


def settled(readings: Sequence[dict[Hashable, Hashable]], max_repeats: int | None = None) -> bool:
    """Whether more repeats could no longer change what the repeats decide (`unsettled` is
    empty): the decision to stop repeating."""
    return not unsettled(readings, max_repeats)


@dataclass
class SweepAgreement:
    key: SweepKey
    readings: list[tuple]  # one per repeat that measured the sweep, in repeat order
    fit: SweepResult | None  # the first repeat's fit that reads the majority (None: no majority)
    agreed: int  # repeats holding the majority reading (0: no majority)
    ran: list[int] = field(default_factory=list)  # the repeats that measured it

    @property
    def of(self) -> int:
        return len(self.readings)

    def as_dict(self) -> dict[str, Any]:
        pattern, k, n = self.key
        top = None if self.fit is None else self.fit.max_threads
        out = {
            "agreed": self.agreed,
            "of": self.of,
            "text": f"{self.agreed} of {self.of} repeats" if self.fit else "no majority",
            "readings": [describe(r, max_threads=top) for r in self.readings],
            "repeats_run": list(self.ran),
        }
        return {"pattern": pattern, "merge_threads": k, "loads_per_thread": n, **out}


@dataclass
class Agreement:
    repeats: int
    sweeps: list[SweepAgreement] = field(default_factory=list)
    limit: dict[str, Any] = field(default_factory=dict)  # the scoreboard quantity
    limit_value: int | None = None  # the limit the classifier works with

    @property
    def repeating(self) -> list[SweepResult]:
        return [s.fit for s in self.sweeps if s.fit is not None]

    @property
    def not_repeating(self) -> list[SweepAgreement]:
        return [s for s in self.sweeps if s.fit is None]

    def weakest(self, fits: Sequence[SweepResult]) -> tuple[int, int]:
        """(agreeing, measuring) repeats of the sweep behind `fits` whose share agreeing is the
        smallest; (repeats, repeats) when there is none."""
        pairs = [(s.agreed, s.of) for s in self.sweeps if s.fit is not None and s.fit in fits]
        return min(pairs, key=lambda p: (p[0] / p[1], p[0]), default=(self.repeats, self.repeats))


def agree(fits: Sequence[dict[SweepKey, SweepResult]], limits: Sequence[dict | None]) -> Agreement:
    """The agreement of per-repeat fits (`fits[r]`: sweep -> fit of repeat r, for the sweeps
    repeat r measured) and scoreboard quantities (`limits[r]`, None where repeat r did not
    measure it). Each sweep's majority is over the repeats that measured it."""
    out = Agreement(repeats=len(fits))
    keys = list(dict.fromkeys(k for f in fits for k in f))
    for key in keys:
        ran = [r for r, f in enumerate(fits) if key in f]
        readings = [sweep_reading(fits[r][key]) for r in ran]
        top = majority(readings)
        fit = None
        if top is not None:
            fit = next(fits[r][key] for r in ran if sweep_reading(fits[r][key]) == top[0])
        out.sweeps.append(SweepAgreement(key, readings, fit, 0 if fit is None else top[1], ran))
    out.limit, out.limit_value = _limit([q for q in limits if q is not None])
    return out


def _limit(limits: Sequence[dict]) -> tuple[dict[str, Any], int | None]:
    readings = [limit_reading(q) for q in limits]
    top = majority(readings)
    n = len(readings)
    if top is not None:
        q = dict(next(q for q in limits if limit_reading(q) == top[0]))
        note = f"{top[1]} of {n} repeats"
        if q.get("value") is not None:
            q["evidence"] = f"{q['evidence']}; {note}"
            q["confidence"] = round(q["confidence"] * top[1] / n, 4)
        else:
            q["undetermined"] = f"{q['undetermined']} ({note})"
        return q, q.get("value") or q.get("at_least")
    # no majority: the classifier leaves out every sweep that any repeat's limit would
    values = [v if v is not None else a for v, a in readings if (v, a) != (None, None)]
    named = ", ".join(describe(r) for r in readings)
    q = undetermined(
        f"the scoreboard limit does not repeat over {n} repeats (readings: {named}); the sweeps "
        "are read within the smallest of them"
    ) | {"readings": [describe(r) for r in readings]}
    return q, min(values, default=None)
