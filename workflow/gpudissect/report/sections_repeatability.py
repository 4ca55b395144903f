"""The repeatability section of a device: the clocks and clock event (throttle) reasons of each
GPU sweep, flagged where they changed or were set (`sweep_clocks` of each result document), and,
for a run that repeated, the values that did not repeat and the spread of the measured ones
(the repeats document, `topology.repeats`). Numbers come from the documents."""

from __future__ import annotations

from typing import Any


def _clock(c: dict[str, Any] | None) -> str:
    c = c or {}
    sm, mem = c.get("sm_clock_mhz"), c.get("memory_clock_mhz")
    return f"{sm if sm is not None else '?'} / {mem if mem is not None else '?'}"


def clocks_lines(docs: dict[str, dict[str, Any]]) -> list[str]:
    rows = [(exp, doc["sweep_clocks"]) for exp, doc in docs.items() if doc.get("sweep_clocks")]
    if not rows:
        return []
    flagged = [exp for exp, c in rows if c.get("flagged")]
    lines = [
        "#### Clocks and throttling of each sweep",
        "",
        "SM / memory clock in MHz before and after each sweep (NVML), and the clock event "
        "(throttle) reasons then set. A sweep is flagged where a clock changed or a reason other "
        "than an idle GPU was set: its cycles may mix clock speeds. "
        + (f"Flagged: {', '.join(flagged)}." if flagged else "No sweep is flagged."),
        "",
        "| experiment | before | after | reasons | flagged |",
        "| --- | --- | --- | --- | --- |",
    ]
    for exp, c in rows:
        reasons = c.get("clock_event_reasons")
        named = "not recorded" if reasons is None else (", ".join(reasons) or "none")
        flag = f"**yes**: {c.get('note')}" if c.get("flagged") else "no"
        lines.append(
            f"| {exp} | {_clock(c.get('before'))} | {_clock(c.get('after'))} | {named} | {flag} |"
        )
    return lines + [""]


def _number(v: float) -> str:
    return f"{v:g}"


def repeats_lines(doc: dict[str, Any] | None) -> list[str]:
    if not doc:
        return []
    n = doc.get("repeats")
    quantities = doc.get("quantities", [])
    flagged = [q for q in quantities if q.get("status") == "does not repeat"]
    measured = [q for q in quantities if q.get("kind") == "measured" and q.get("spread")]
    lines = [
        f"#### Repeats of the whole run ({n})",
        "",
        f"The whole run was repeated {n} times. Structural values (sizes, lines, sets, ways, "
        "counts, kinds, policies) must be equal in every repeat: "
        + (
            f"{len(flagged)} do not repeat and are undetermined in the topology."
            if flagged
            else "all of them repeat."
        ),
        "",
    ]
    if flagged:
        lines += ["| quantity | experiment | readings by repeat |", "| --- | --- | --- |"]
        for q in flagged:
            readings = "; ".join(
                f"r{r['repeat']}: {'undetermined' if r.get('value') is None else r['value']}"
                for r in q["readings"]
            )
            lines.append(f"| {q['element']}.{q['quantity']} | {q['experiment']} | {readings} |")
        lines.append("")
    if measured:
        lines += [
            "Measured values, spread over the repeats that determined them:",
            "",
            "| quantity | experiment | min | median | max | determined in |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for q in measured:
            s = q["spread"]
            unit = f" {q['unit']}" if q.get("unit") else ""
            lines.append(
                f"| {q['element']}.{q['quantity']} | {q['experiment']} | {_number(s['min'])}"
                f"{unit} | {_number(s['median'])} | {_number(s['max'])} | "
                f"{s['determined_in']} of {n} |"
            )
        lines.append("")
    return lines


def repeatability_section(docs: dict[str, dict[str, Any]], repeats: dict | None) -> list[str]:
    """The device's section (empty for a simulated device run once: nothing to show)."""
    clocks, reps = clocks_lines(docs), repeats_lines(repeats)
    if not clocks and not reps:
        return []
    return ["### Repeatability", "", *clocks, *reps]
