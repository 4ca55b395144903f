"""Per quantity, a GPU's topology against its twin's: agree, differ, assumed or not compared.

Both sides are topology documents (the twin's comes from running the pipeline on the generated
profile); no profile is read. A quantity of the GPU's document is
- `assumed` when the GPU's run left it undetermined (the twin took a documented default),
- `not compared` when it comes from the driver or from an experiment the twin's run did not run,
- `agree` when the twin's run recovers it (numbers within the topology's 3% rule, `reconcile`;
  cycle counts also within half a cycle: a profile holds whole cycles, so a GPU's median of
  9.5 cycles is 10 in its twin's profile and cannot be read back closer),
- `differ` otherwise, with why: the profile carries the value (`twin.MODELLED`), so the analysis
  read the twin differently from the value it was built with; or the twin does not model it (the
  simulator has no mechanism for it, or the run did not measure what produces it, such as the TLBs
  behind an L2 latency step): an open question either way.
"""

from __future__ import annotations

from typing import Any

from ..topology.reconcile import agrees
from .build import MODELLED

STATUSES = ("agree", "differ", "assumed", "not compared")
# a profile's latencies are whole cycles (twin.reading.round_int): the most a twin's reading can
# differ from a GPU's by that rounding alone
CYCLE_ROUNDING = 0.5
NO_MECHANISM = (
    "the twin does not model it: the simulator has no mechanism for it, or what produces it "
    "was not measured"
)
READ_DIFFERENTLY = "the analysis reads the twin differently from the value its profile carries"


def _twin_experiments(twin: dict[str, Any]) -> set[str]:
    return {s["experiment"] for s in twin.get("sources") or []}


def _identity(doc: dict[str, Any]) -> dict[str, Any]:
    """What names the GPU a topology describes: its model (a twin's without " (twin)"), compute
    capability and UUID, each as the driver (or the twin's profile) gave it, when present."""
    driver = doc.get("driver") or {}
    name = driver.get("name") or doc.get("gpu")
    if isinstance(name, str):
        name = name.removesuffix(" (twin)")
    return {
        "model": name,
        "compute capability": driver.get("compute_capability"),
        "UUID": driver.get("uuid"),
    }


def different_gpus(real: dict[str, Any], twin: dict[str, Any]) -> str | None:
    """How two topologies' GPUs differ (model, compute capability or UUID, where both give it),
    or None when they may be one GPU and its twin."""
    a, b = _identity(real), _identity(twin)
    differ = [
        f"{key} {a[key]!r} vs {b[key]!r}"
        for key in a
        if a[key] is not None and b[key] is not None and a[key] != b[key]
    ]
    return "; ".join(differ) or None


def compare_topologies(real: dict[str, Any], twin: dict[str, Any]) -> dict[str, Any]:
    """The agreement document: one row per quantity of `real`, the counts, the open questions."""
    ran = _twin_experiments(twin)
    rows = []
    for element, quantities in sorted((real.get("elements") or {}).items()):
        for quantity, entry in sorted(quantities.items()):
            mine = ((twin.get("elements") or {}).get(element) or {}).get(quantity) or {}
            mine, headline = _at_headline(entry, mine)
            row = {
                "element": element,
                "quantity": quantity,
                "gpu": entry.get("value"),
                "twin": mine.get("value"),
                "unit": entry.get("unit") or mine.get("unit"),
                "gpu_experiment": entry.get("experiment"),
                "twin_experiment": mine.get("experiment"),
            }
            row.update(
                _status(
                    element,
                    quantity,
                    entry,
                    mine,
                    ran,
                    cycles=row["unit"] == "cycles",
                    measure=row["unit"] in MEASURES,
                )
            )
            if headline:
                row["why"] = f"{row['why']}; {headline}" if row["why"] else headline
            rows.append(row)
    rows += _by_carveout_rows(real, twin, ran)
    counts = {s: sum(r["status"] == s for r in rows) for s in STATUSES}
    return {
        "gpu": {
            "device": real.get("device"),
            "gpu": real.get("gpu"),
            "backend": real.get("backend"),
        },
        "twin": {
            "device": twin.get("device"),
            "gpu": twin.get("gpu"),
            "backend": twin.get("backend"),
        },
        "rule": "numbers agree within 3% (the topology's reconciliation rule) or, in cycles, "
        "within the half cycle of a profile's whole-cycle rounding; lists of bytes or cycles "
        "element by element; others when equal",
        "counts": counts,
        "rows": rows,
        "open_questions": [
            f"{r['element']}.{r['quantity']}: GPU {fmt_value(r['gpu'])}, twin "
            f"{fmt_value(r['twin'])}: {r['why']}"
            + (f" ({_gist(r['detail'])})" if r.get("detail") else "")
            for r in rows
            if r["status"] == "differ"
        ],
    }


def _condition(reading: dict[str, Any], chosen: dict[str, Any]) -> tuple:
    """(carveout, shared buffer) a reading was measured at (an other reading that names
    neither was measured at the chosen reading's)."""
    return tuple(reading.get(k, chosen.get(k)) for k in ("carveout_pct", "shared_buffer_bytes"))


def _at_headline(entry: dict[str, Any], mine: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The twin's reading of a headline L1 size (the largest a kernel gets, `reconcile`) made
    where the GPU's headline was measured (carveout and shared buffer), and a note when it is
    not the twin's own headline: the two headlines may come from different shared partitions
    (the GPU's reading beside no shared buffer undetermined, the twin's determined), and sizes
    beside different partitions are not one quantity. Otherwise the twin's entry as it is."""
    if "headline" not in entry or not mine:
        return mine, ""
    want = _condition(entry, entry)
    if _condition(mine, mine) == want:
        return mine, ""
    readings = [r for r in (mine.get("other_readings") or ()) if r.get("value") is not None]
    same = [r for r in readings if _condition(r, mine) == want]
    same.sort(key=lambda r: r.get("experiment") != entry.get("experiment"))
    if not same:
        return mine, ""
    pct, buffer = want
    theirs = mine.get("shared_buffer_bytes")
    return same[0], (
        f"compared at the GPU's headline condition (carveout {pct}%, {buffer} B of shared "
        f"memory, {same[0].get('experiment')}); the twin's headline, {mine.get('value')} B "
        f"from {mine.get('experiment')} beside {theirs} B, has no determined GPU reading there"
    )


def _carveout_points(doc: dict[str, Any], element: str) -> dict[tuple, dict[str, Any]]:
    entry = ((doc.get("elements") or {}).get(element) or {}).get("size_bytes") or {}
    return {
        (p.get("carveout_pct"), p.get("shared_buffer_bytes")): p
        for p in entry.get("by_carveout") or ()
    }


def _by_carveout_rows(real: dict[str, Any], twin: dict[str, Any], ran: set[str]) -> list[dict]:
    """One row per carveout and shared buffer at which the GPU's cache size was measured."""
    rows = []
    for element in sorted(real.get("elements") or {}):
        theirs = _carveout_points(twin, element)
        for (pct, buffer), point in sorted(_carveout_points(real, element).items(), key=str):
            mine = theirs.get((pct, buffer)) or {}
            row = {
                "element": element,
                "quantity": f"size_bytes at carveout {pct}% beside {buffer} B of shared memory",
                "gpu": point.get("value"),
                "twin": mine.get("value"),
                "unit": "bytes",
                "gpu_experiment": point.get("experiment"),
                "twin_experiment": mine.get("experiment"),
            }
            if theirs or point.get("value") is None:
                row.update(_status(element, "size_bytes", point, mine, ran))
            else:  # the twin's L1 keeps one size: its profile has no carveout block
                row.update(
                    {"status": "differ", "why": NO_MECHANISM + "; the twin ran no carveouts"}
                    if point.get("experiment") in ran
                    else _status(element, "size_bytes", point, mine, ran)
                )
            rows.append(row)
    return rows


# units whose lists are compared element by element (masks and names stay exact)
MEASURES = ("bytes", "cycles")


def _within_rounding(a: Any, b: Any) -> bool:
    numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (a, b))
    return numeric and abs(a - b) <= CYCLE_ROUNDING


def _lists_agree(a: Any, b: Any) -> bool:
    """Two lists of measures (bytes, cycles) of one length, element by element by the rule."""
    return (
        isinstance(a, list)
        and isinstance(b, list)
        and len(a) == len(b) > 0
        and all(agrees(x, y) for x, y in zip(a, b, strict=True))
    )


def _status(element, quantity, entry, mine, ran, *, cycles=False, measure=False) -> dict:
    """status, why (short, for the table) and detail (the analysis's reason, where one is)."""
    if entry.get("value") is None:
        return {
            "status": "assumed",
            "why": "undetermined on the GPU",
            "detail": entry.get("undetermined", ""),
        }
    experiment = entry.get("experiment")
    if experiment == "driver":
        return {"status": "not compared", "why": "reported by the driver, not measured"}
    if experiment not in ran:
        return {"status": "not compared", "why": f"{experiment} did not run on the twin"}
    if mine.get("value") is not None and agrees(entry["value"], mine["value"]):
        return {"status": "agree", "why": ""}
    if measure and _lists_agree(entry["value"], mine.get("value")):
        return {"status": "agree", "why": "each within the rule"}
    if cycles and _within_rounding(entry["value"], mine.get("value")):
        return {"status": "agree", "why": "within the profile's whole-cycle rounding"}
    why = READ_DIFFERENTLY if (element, quantity) in MODELLED else NO_MECHANISM
    out = {"status": "differ", "why": why}
    if mine.get("value") is None:
        out["why"] += "; undetermined on the twin"
        out["detail"] = mine.get("undetermined", "not measured")
    return out


def _gist(text: str) -> str:
    """The first clause of an analysis's reason (the whole stays in the document)."""
    head = text.split(";")[0].split(": ")[0].strip()
    return head if len(head) <= 90 else head[:87] + "..."


def fmt_value(v: Any) -> str:
    if v is None:
        return "undetermined"
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, list):
        return ", ".join(str(x) for x in v) or "none"
    return str(v)


def agreement_table(doc: dict[str, Any]) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """(header, rows) of the compared, differing and assumed quantities."""
    # element and quantity in columns of their own: joined, the longest names overflow a page
    header = ("element", "quantity", "GPU", "twin", "status", "why")
    rows = [
        (
            r["element"],
            r["quantity"],
            fmt_value(r["gpu"]),
            fmt_value(r["twin"]),
            r["status"],
            r["why"],
        )
        for r in doc["rows"]
        if r["status"] != "not compared"
    ]
    return header, rows


def counts_line(doc: dict[str, Any]) -> str:
    c = doc["counts"]
    return (
        f"{c['agree']} agree, {c['differ']} differ, {c['assumed']} assumed "
        f"({c['not compared']} not compared: driver facts and experiments the twin did not run)"
    )


def to_markdown(doc: dict[str, Any]) -> str:
    header, rows = agreement_table(doc)
    lines = [
        f"# {doc['gpu']['gpu']} and its twin",
        "",
        f"GPU topology `{doc['gpu']['device']}` ({doc['gpu']['backend']}) against the topology "
        f"the pipeline recovers from its twin `{doc['twin']['device']}` "
        f"({doc['twin']['backend']}): {counts_line(doc)}. Rule: {doc['rule']}.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    lines += ["| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in rows]
    lines += ["", "## Open questions", ""]
    lines += [f"- {q}" for q in doc["open_questions"]] or ["- none"]
    return "\n".join(lines) + "\n"
