"""The report tells the truth at a glance (issue 34): a simulated device is labelled simulated
wherever its numbers stand, the state words (measured / undetermined / not applicable / not
measured) match the documents, no template text leaks, and a legend names only marks its table
uses. Checked over every document and the rendered report (Markdown and LaTeX) of a small
default-style run: the papers' Fermi and Kepler twins, on the load paths where the Fermi twin
lacks the read-only path and the Kepler twin's `ca` path has no L1, and the Kepler twin's bank
model. `run_defects` applies the same checks to a whole run's results folder (the default run of
tests/test_artifact_bundle.py)."""

import json
import re
from pathlib import Path

import pytest

from gpudissect.config import load
from gpudissect.families import FAMILIES, family
from gpudissect.report.build import DeviceData, load_device
from gpudissect.report.render import render_report
from gpudissect.report.studies import STUDIES
from gpudissect.report.topology_table import _fmt
from gpudissect.sweep import run_experiment
from gpudissect.topology import build_topology, validate_topology
from gpudissect.traces import read_trace

REPO = Path(__file__).resolve().parents[2]

# The default config's twins, each on the load path that shows a state other than "measured".
CONFIG = """
devices:
  - name: gtx560ti
    backend: sim
    profile: {repo}/config/devices/gtx560ti.yaml
    seed: 1
    experiments:
      l1_size:
        path: nc
        stride_bytes: 32
        array_bytes: {{start: 4096, stop: 8192, step: 512}}
  - name: gtx780
    backend: sim
    profile: {repo}/config/devices/gtx780.yaml
    seed: 1
    experiments:
      cache_stage1:
        paths:
          ca: {{levels: [{{array_bytes: {{start: 2048, stop: 32768, step: 2048}}}}]}}
report:
  title: report truth
"""

RUNS = {"gtx560ti": ("l1_size",), "gtx780": ("cache_stage1", "bank_conflicts")}
TEMPLATE = re.compile(r"\bNone\b|\bnan\b|\bNaN\b|<device>|\$<\$device\$>\$")
UNFILLED = re.compile(r"\{[a-z_]+\}")  # a format field left in the Markdown
SIM_HEADING = re.compile(r"twin \(simulated")
STATE_WORDS = ("undetermined", "not applicable")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    work = tmp_path_factory.mktemp("truth")
    (work / "config.yaml").write_text(CONFIG.format(repo=REPO))
    cfg = load(work / "config.yaml", base_dir=REPO)
    devices = []
    for dev in cfg.devices:
        docs = {}
        for exp in RUNS[dev.name]:
            trace = run_experiment(dev, exp, out=work / "traces" / dev.name / f"{exp}.parquet")
            t = read_trace(trace, schema=family(exp).schema)
            doc = family(exp).analyse(t.data, provenance=t.provenance)
            path = work / "analysis" / dev.name / f"{exp}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(doc))
            docs[exp] = json.loads(path.read_text())
        topo = build_topology(
            dev.name, sorted((work / "analysis" / dev.name).glob("*.json")), tuple(FAMILIES)
        )
        validate_topology(topo)
        devices.append(DeviceData(dev.name, docs, topology=topo, run_name=dev.name))
    out = work / "report" / "report.md"
    render_report(devices, title="report truth", out=out, studies=list(STUDIES.values()))
    return {
        "devices": devices,
        "md": out.read_text(),
        "tex": out.with_suffix(".tex").read_text(),
    }


def report_defects(md: str, tex: str, devices: list[DeviceData]) -> list[str]:
    """Every defect of issue 34's kinds in a rendered report, one line each."""
    found = []
    for kind, text in (("md", md), ("tex", tex)):
        for n, line in enumerate(text.splitlines(), 1):
            m = TEMPLATE.search(line) or (UNFILLED.search(line) if kind == "md" else None)
            if m:
                found.append(f"{kind}:{n}: template text {m[0]!r}: {line[:120]}")
    lines = md.splitlines()
    sim = {d.name for d in devices if (d.topology or {}).get("backend") == "sim"}
    for n, line in enumerate(lines, 1):
        # a heading that names a simulated device says it is simulated
        if line.startswith("#"):
            for name in sim:
                if re.search(rf"\b{name}\b", line) and not SIM_HEADING.search(line):
                    found.append(f"md:{n}: heading of simulated {name} without the label: {line}")
        if line.startswith("| quantity | measured |") and any(
            re.search(rf"^### {name}\b", prev) for name in sim for prev in _last_heading(lines, n)
        ):
            found.append(f"md:{n}: a simulated device's value column reads 'measured'")
        # a table header naming a simulated device says so in its column
        if line.startswith("| quantity |"):
            for cell in line.strip("|").split("|"):
                if cell.strip() in sim:
                    found.append(f"md:{n}: column {cell.strip()!r} without '(simulated)'")
    if (
        sim
        and "Recovered from a simulation" not in md.split("## Summary", 1)[-1].split("\n## ", 1)[0]
    ):
        found.append("md: the summary does not open with what was simulated")
    if "Measured on hardware in this run" not in md:
        found.append("md: the summary does not say what was measured on hardware")
    # legends name only marks their table uses
    for n, line in enumerate(lines, 1):
        if line.startswith("_") and "@N%" in line:
            table = _table_above(lines, n - 1)
            if not re.search(r" @\d+%", table):
                found.append(f"md:{n}: legend for '@N%' on a table without it")
        if line.startswith("_") and "(driver ...)" in line:
            if "(driver" not in _table_above(lines, n - 1).replace("(driver ...)", ""):
                found.append(f"md:{n}: legend for '(driver ...)' on a table without it")
    found += _state_defects(md, devices)
    found += _reading_defects(md, devices)
    found += _fit_defects(md)
    return found


def _disagreements(topology: dict) -> list[tuple[str, dict, dict]]:
    """(element.quantity, chosen entry, other reading) for every reading the topology's
    reconciliation finds in disagreement with the value it chose, not explained as another
    quantity's reading."""
    out = []
    for element, qs in ((topology or {}).get("elements") or {}).items():
        for name, entry in (qs or {}).items():
            if not isinstance(entry, dict) or entry.get("value") is None:
                continue
            for other in entry.get("other_readings") or []:
                if other.get("agrees") is False and not other.get("note"):
                    out.append((f"{element}.{name}", entry, other))
    return out


def _reading_defects(md: str, devices: list[DeviceData]) -> list[str]:
    """Issue 34 (b): a quantity two methods read in disagreement is flagged in the device's
    summary with both values and both methods; nothing that agrees is flagged."""
    found = []
    for d in devices:
        part = _summary_part(md, d.name)
        flags = [line for line in part.splitlines() if line.startswith("- **disagree**")]
        for key, entry, other in _disagreements(d.topology):
            quantity = key.split(".", 1)[1]
            values = [_fmt(quantity, e["value"]) for e in (entry, other)]
            named = [
                line
                for line in flags
                if f"`{key}`" in line
                and all(
                    f"{v} ({e['experiment']}" in line
                    for v, e in zip(values, (entry, other), strict=True)
                )
            ]
            if not named:
                found.append(
                    f"{d.name}: {key} read {values[0]} by {entry['experiment']} and {values[1]} "
                    f"by {other['experiment']} (they disagree) without a flag"
                )
        keys = {key for key, _, _ in _disagreements(d.topology)}
        for line in flags:
            m = re.search(r"`([a-z0-9_]+\.[a-z0-9_]+)`", line)
            if m and m[1] not in keys:
                found.append(f"{d.name}: flagged though the readings agree: {line[:120]}")
    return found


REJECTED = re.compile(r"undetermined: the linear law misses \d+ of \d+|not constant on this device")
FIT = re.compile(r"latency = (?P<base>-?[\d.]+) .*R\^2 = ")
NO_CONFLICT = re.compile(r"^\| latency without conflict \(cycles\) \| (?P<v>-?[\d.]+) \|")


def _fit_defects(md: str) -> list[str]:
    """Issue 34 (c): a fit stands with its own acceptance verdict, never beside a contrary one:
    a fitted law in a section that finds the law failing reads **rejected**; one whose intercept
    is not the measured no-conflict latency (beyond the law's 5%) is not **accepted**."""
    found = []
    sections = re.split(r"\n(?=#)", md)
    device = ""
    for section in sections:
        first = section.splitlines()[0] if section else ""
        if first.startswith("## Device "):
            device = first[len("## Device ") :].split(":")[0] + ": "
        heading = device + first.lstrip("# ")[:60]
        fits = [line for line in section.splitlines() if FIT.search(line)]
        if not fits:
            continue
        rejected = bool(REJECTED.search(section))
        no_conflict = next(
            (float(m["v"]) for line in section.splitlines() if (m := NO_CONFLICT.match(line))),
            None,
        )
        for line in fits:
            base = float(FIT.search(line)["base"])
            off = no_conflict is not None and abs(base - no_conflict) > 0.05 * abs(no_conflict)
            if (rejected or off) and "**rejected**" not in line:
                why = (
                    "the section finds the law failing"
                    if rejected
                    else (f"intercept {base:g} against the measured {no_conflict:g} cycles")
                )
                found.append(f"{heading}: a fit shown without its rejection ({why})")
            if "**accepted**" in line and (rejected or off):
                found.append(f"{heading}: a fit marked accepted beside a contrary verdict")
            if "**rejected**" not in line and "**accepted**" not in line:
                found.append(f"{heading}: a fit shown with no acceptance verdict")
    return found


def run_defects(results: Path) -> list[str]:
    """Every defect over a pipeline run's results folder: each device's documents, topology
    and the rendered report (Markdown and LaTeX)."""
    report = results / "report" / "report.md"
    md = report.read_text()
    # the devices the report renders: a results folder may hold other runs' documents too (the
    # artifact bundle ships the source's results beside the default run's)
    names = sorted(
        p.name
        for p in (results / "analysis").iterdir()
        if p.is_dir() and f"## Device {p.name}:" in md
    )
    devices = [
        load_device(
            n,
            analysis_dir=results / "analysis",
            figures_dir=results / "figures",
            topology=results / "topology" / f"{n}.json",
        )
        for n in names
    ]
    return report_defects(md, report.with_suffix(".tex").read_text(), devices)


def _last_heading(lines: list[str], n: int) -> list[str]:
    """The heading above line `n` (1-based), as a one-item list (none: empty)."""
    for prev in reversed(lines[: n - 1]):
        if prev.startswith("#"):
            return [prev]
    return []


def _table_above(lines: list[str], i: int) -> str:
    while i > 0 and not lines[i - 1].startswith("|"):
        i -= 1
    rows = []
    while i > 0 and lines[i - 1].startswith("|"):
        rows.append(lines[i - 1])
        i -= 1
    return "\n".join(rows)


def _state_defects(md: str, devices: list[DeviceData]) -> list[str]:
    """A quantity the documents mark not applicable must not read "undetermined" in the report,
    and one they leave undetermined must not read "not applicable"."""
    found = []
    for d in devices:
        part = _summary_part(md, d.name)
        for exp, doc in d.docs.items():
            for element, qs in (doc.get("elements") or {}).items():
                for name, q in (qs or {}).items():
                    if not isinstance(q, dict) or q.get("value") is not None or "value" not in q:
                        continue
                    wrong = "undetermined" if "not_applicable" in q else "not applicable"
                    for line in part.splitlines():
                        if not (line.startswith(f"- `{element}`:") and f"({exp})" in line):
                            continue
                        if f"`{name}`" in line.split(f"({exp})")[0]:
                            if _section_word(part, line) == wrong:
                                found.append(f"{d.name} {exp} {element}.{name}: shown {wrong}")
    # the cache stage-1 notes: a path served at another level has no such cache (decided)
    for n, line in enumerate(md.splitlines(), 1):
        if "latency level" in line and "served at" in line and "undetermined" in line:
            found.append(f"md:{n}: a decided path reads undetermined: {line[:120]}")
    decided = ("served at the", "served by the", "has no such load path", "load path, so nothing")
    for n, line in enumerate(md.splitlines(), 1):
        if line.startswith("- ") and any(d in line for d in decided):
            if _section_word(md, line).startswith("undetermined"):
                found.append(f"md:{n}: a decided quantity listed as undetermined: {line[:120]}")
        if "has no `" in line and "load path" in line and "undetermined" in line.lower():
            found.append(f"md:{n}: a missing load path reads undetermined: {line[:120]}")
    return found


def _summary_part(md: str, device: str) -> str:
    """The device's part of the summary: from its heading to the next heading."""
    lines = md.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(f"### {device}:") or line.startswith(f"### {device} ("):
            end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("#")), None)
            return "\n".join(lines[i:end])
    return ""


def _section_word(md: str, line: str) -> str:
    """The state word of the bullet list `line` stands in ("Undetermined (n):")."""
    before = md[: md.index(line)].rstrip().splitlines()
    for prev in reversed(before):
        if prev.strip() and not prev.startswith("- "):
            return prev.split(" (")[0].strip().lower()
    return ""


def test_the_run_exercises_every_state(run):
    states = set()
    for d in run["devices"]:
        for doc in d.docs.values():
            for qs in (doc.get("elements") or {}).values():
                for q in (qs or {}).values():
                    if isinstance(q, dict) and "value" in q:
                        states.add(
                            "measured"
                            if q["value"] is not None
                            else "not applicable"
                            if "not_applicable" in q
                            else "undetermined"
                        )
    assert "not applicable" in states and "measured" in states


def test_the_report_has_none_of_the_defects(run):
    assert report_defects(run["md"], run["tex"], run["devices"]) == []


def test_the_summary_opens_with_what_was_simulated(run):
    summary = run["md"].split("# Summary", 1)[1].split("\n#", 1)[0]
    assert "**Measured on hardware in this run**: none (no device measured on hardware" in summary
    assert "gtx560ti: GeForce GTX 560 Ti twin (simulated from" in summary
    assert "not a hardware measurement" in summary
    assert "GTX 560 Ti twin (simulated" in run["tex"].split("\\section", 2)[1]


def test_the_checker_catches_each_defect(run):
    md, devices = run["md"], run["devices"]
    bad = md.replace("### gtx560ti: GeForce GTX 560 Ti twin (simulated from", "### gtx560ti (")
    assert any("without the label" in f for f in report_defects(bad, run["tex"], devices))
    bad = md + "\nthe page-table window None bytes\n"
    assert any("template text 'None'" in f for f in report_defects(bad, run["tex"], devices))
    bad = md + "\n| quantity | gtx780 |\n|---|---|\n| x | 1 |\n"
    assert any("without '(simulated)'" in f for f in report_defects(bad, run["tex"], devices))
    bad = md + "\n| a | b |\n|---|---|\n| x | 1 KiB |\n\n_@N%: the carveout_\n"
    assert any("'@N%'" in f for f in report_defects(bad, run["tex"], devices))
    bad = md.replace("Not applicable (", "Undetermined (")  # the lists' state words swapped
    assert any("shown undetermined" in f for f in report_defects(bad, run["tex"], devices))
    bad = md + "\n### gtx780: GeForce GTX 780 twin (simulated)\n\n| quantity | measured |\n"
    assert any("reads 'measured'" in f for f in report_defects(bad, run["tex"], devices))


def _with_disagreement(devices: list[DeviceData]) -> tuple[list[DeviceData], str, str]:
    """The devices with a second reading, twice the value, of the first numeric quantity a
    topology holds: a disagreement beyond any resolution. Returns them, the device and the
    `element.quantity`."""
    for i, d in enumerate(devices):
        topo = json.loads(json.dumps(d.topology))
        for element, qs in topo["elements"].items():
            for name, entry in qs.items():
                v = entry.get("value") if isinstance(entry, dict) else None
                if isinstance(v, int | float) and not isinstance(v, bool) and v > 0:
                    other = {"experiment": "caches", "value": 2 * v, "unit": entry.get("unit")}
                    entry["other_readings"] = [other | {"agrees": False, "agrees_by": "beyond 3%"}]
                    changed = DeviceData(d.name, d.docs, topology=topo, run_name=d.name)
                    return [*devices[:i], changed, *devices[i + 1 :]], d.name, f"{element}.{name}"
    raise AssertionError("no topology of the run holds a number")


def test_an_unflagged_disagreement_is_caught_and_the_report_flags_it(run, tmp_path):
    md, tex, devices = run["md"], run["tex"], run["devices"]
    changed, name, key = _with_disagreement(devices)
    # the report rendered without the second reading does not flag it
    assert any(
        f"{key} read" in f and "without a flag" in f for f in report_defects(md, tex, changed)
    )
    # the report rendered with it flags it with both values
    out = tmp_path / "report.md"
    render_report(changed, title="report truth", out=out, studies=list(STUDIES.values()))
    flagged = out.read_text()
    assert f"**disagree**: `{key}`" in flagged
    assert report_defects(flagged, out.with_suffix(".tex").read_text(), changed) == []
    # a flag on readings that agree is a defect too
    part = _summary_part(md, name)
    bad = md.replace(part, part + f"\n- **disagree**: `{key}`: 1 KiB (a) and 2 KiB (b)\n")
    assert any("flagged though the readings agree" in f for f in report_defects(bad, tex, devices))


# the GTX 980 twin's bank section as it read before its fit carried a verdict (issue 34)
BANKS_AS_SEEN = "\n".join(
    (
        "",
        "### Shared-memory banks: strided access (TPDS Sec. 6.2, NPC Sec. 3.1)",
        "",
        "| quantity | measured | paper | source |",
        "| --- | --- | --- | --- |",
        "| latency without conflict (cycles) | 47.00 | 47 | |",
        "| cycles per extra way (fit) | undetermined: the linear law misses 211 of 258 points "
        "by more than 5% | — | |",
        "",
        "Model: latency = 57.5 (95% CI [56.9, 58.1]) + 14.2 (95% CI [13.9, 14.5]) x "
        "(degree - 1), R^2 = 0.9790 over 258 points; the degree of each stride comes from 32 "
        "banks of 4 bytes, chosen by BIC among:",
        "",
    )
)


def test_a_fit_beside_a_contrary_verdict_is_caught(run):
    md, tex, devices = run["md"], run["tex"], run["devices"]
    assert "Linear fit, **" in md  # the run's own bank section states its fit's verdict
    found = report_defects(md + BANKS_AS_SEEN, tex, devices)
    assert any("a fit shown without its rejection" in f for f in found)
    # its intercept alone is reason enough: 57.5 cycles is not the measured 47
    accepted = BANKS_AS_SEEN.replace("undetermined: the linear law misses 211 of 258 points", "2")
    accepted = accepted.replace("Model: latency", "Linear fit, **accepted**: latency")
    found = report_defects(md + accepted, tex, devices)
    assert any("intercept 57.5 against the measured 47" in f for f in found)
    assert any("marked accepted beside a contrary verdict" in f for f in found)
