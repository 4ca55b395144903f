"""The fleet report of the committed reference results: it builds for any number of GPUs, every
figure it references exists, the summary shows the documents' values, and no difference it
reports is negative where it cannot be."""

import json
import re
import shutil
from pathlib import Path

import pytest

from gpudissect.cli import main

REPO = Path(__file__).resolve().parents[2]
REFERENCE = REPO / "results" / "reference"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """The reference folder as committed, plus a second GPU (a copy of the first under another
    name), so the side-by-side tables have two columns."""
    root = tmp_path_factory.mktemp("reference")
    first = sorted(p for p in REFERENCE.iterdir() if (p / "analysis").is_dir())[0]
    for name in (first.name, f"{first.name}_copy"):
        dst = root / name
        for part in ("analysis", "figures"):
            shutil.copytree(first / part, dst / part)
    out = root / "report" / "fleet.md"
    assert main(["report", "--reference", str(root), "--out", str(out), "--title", "fleet"]) == 0
    return root, out, first.name


def _summary_table(md: str, device: str) -> dict[str, list[str]]:
    part = md.split(f"### {device}", 1)[1].split("\n### ", 1)[0]
    rows = [line.strip("|").split("|") for line in part.splitlines() if line.startswith("| ")]
    return {r[0].strip(): [c.strip() for c in r[1:]] for r in rows[2:]}  # past the rule


def test_every_referenced_figure_exists(fleet):
    _, out, _ = fleet
    md = out.read_text()
    paths = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)
    assert paths, "the fleet report shows no figure"
    for p in paths:
        assert (out.parent / p).is_file(), p
    tex = out.with_suffix(".tex").read_text()
    for p in re.findall(r"keepaspectratio\]\{([^}]+)\}", tex):
        assert (out.parent / f"{p}.pdf").is_file() or (out.parent / f"{p}.png").is_file(), p


def test_summary_values_equal_the_analysis_documents(fleet):
    root, out, name = fleet
    md = out.read_text()
    analysis = next((root / name / "analysis").iterdir())
    l1_doc = json.loads((analysis / "l1_size.json").read_text())
    tlbs = json.loads((analysis / "tlbs.json").read_text())["elements"]
    table = _summary_table(md, name)
    # the largest L1 a kernel gets: the series at the lowest carveout, then the smallest shared
    # buffer (the topology's headline), with where it was measured
    series = min(l1_doc["series"], key=lambda s: (s["carveout_pct"], s["shared_buffer_bytes"]))
    l1 = series["l1d"]
    size = l1["size_bytes"]["value"]  # bytes, printed in KiB
    assert size == max(s["l1d"]["size_bytes"]["value"] for s in l1_doc["series"])
    where = f"carveout {series['carveout_pct']}%"
    where += f", beside {series['shared_buffer_bytes'] // 1024} KiB of shared memory"
    row = table[f"L1 data size ({where})"]
    kib = row[0].split(" KiB")[0]  # KiB to two decimals, and the bytes where they are not whole
    assert float(kib) == round(size / 1024, 2)
    assert size % 1024 == 0 or f"({size} B)" in row[0]
    assert row[1] == f"{l1['size_bytes']['confidence']:.2f}"
    assert table["L2 TLB entries"][0] == str(tlbs["l2_tlb"]["entries"]["value"])
    assert table["L1 TLB entries"][0] == str(tlbs["l1_tlb"]["entries"]["value"])
    # the side-by-side table has a column per GPU holding the same values
    fleet_rows = [line for line in md.splitlines() if line.startswith("| L2 TLB entries |")]
    entries = str(tlbs["l2_tlb"]["entries"]["value"])
    assert fleet_rows[0] == f"| L2 TLB entries | {entries} | {entries} |"


def test_no_difference_is_negative_where_it_cannot_be(fleet):
    _, out, _ = fleet
    md = out.read_text()
    penalties = re.findall(r"\(P\d - P\d\): (-?\d+) cycles", md)
    assert all(int(p) >= 0 for p in penalties)
    assert not re.search(r"costs -\d", md)


def test_confidence_is_printed_with_two_decimals(fleet):
    _, out, name = fleet
    table = _summary_table(out.read_text(), name)
    for row in table.values():
        assert row[1] == "—" or re.fullmatch(r"\d\.\d\d", row[1]), row


@pytest.mark.skipif(shutil.which("latexmk") is None, reason="needs latexmk and TeX")
def test_fleet_pdf_builds(fleet):
    _, out, _ = fleet
    pdf = out.with_suffix(".pdf")
    assert main(["pdf", "--tex", str(out.with_suffix(".tex")), "--out", str(pdf)]) == 0
    assert pdf.read_bytes()[:5] == b"%PDF-"
    assert not list(out.parent.glob(".latex-*")), "latexmk left its scratch folder"
