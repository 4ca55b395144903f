"""The report model: verdicts, differences, the summary's values, the two renderings."""

import re

import pytest

from gpudissect.report.compare import Quantity, difference, fmt, lookup, verdict
from gpudissect.report.latex import escape, inline, render_latex
from gpudissect.report.markdown import render_markdown
from gpudissect.report.model import (
    Bullets,
    Document,
    Figure,
    Heading,
    Paragraph,
    Table,
    from_markdown,
)
from gpudissect.report.sections_tlb import pattern_differences
from gpudissect.report.summary import device_summary, undetermined


def q(value, unit="", confidence=None, reason=""):
    return Quantity(value, unit, confidence, reason)


def test_structure_agrees_only_when_equal():
    assert verdict(q(16384), (16384, "Table V"), timing=False).status == "agrees"
    v = verdict(q(12288), (16384, "Table V"), timing=False)
    # 12288 - 16384 = -4096, -25 % of 16384
    assert (v.status, v.text) == ("differs", "-4096 (-25.0 %)")


def test_timing_agrees_within_ten_percent():
    # 121 vs 116: +5 cycles, 4.3 %: within 10 %; 130 vs 116: +14, 12.1 %: not
    assert verdict(q(121.0), (116, ""), timing=True).status == "agrees"
    v = verdict(q(130.0), (116, ""), timing=True)
    assert (v.status, v.text) == ("differs", "+14 (+12.1 %)")


def test_undetermined_and_missing_paper_values():
    v = verdict(q(None, reason="stage 2 did not run"), (4, ""), timing=False)
    assert (v.status, v.text) == ("undetermined", "stage 2 did not run")
    assert verdict(q(4), None, timing=False).status == "no paper value"
    assert verdict(None, (4, ""), timing=False).status == "not measured"


def test_policy_against_the_papers_lru_flag():
    assert verdict(q("lru"), (True, ""), timing=False).status == "agrees"
    assert verdict(q("non-lru"), (False, ""), timing=False).status == "agrees"
    assert verdict(q("fifo"), (True, ""), timing=False).status == "differs"


def test_a_difference_in_the_noise_or_of_the_wrong_sign_is_undetermined():
    assert difference(300.0, 100.0, noise=5.0) == (200.0, "")
    value, reason = difference(100.0, 98.0, noise=5.0)  # 2 cycles, spreads add to 5
    assert value is None and "within the noise" in reason
    value, reason = difference(100.0, 113.0, noise=5.0)  # -13: a penalty cannot be negative
    assert value is None and "negative" in reason
    assert difference(100.0, 113.0, noise=5.0, can_be_negative=True)[0] == -13.0


def _pattern(median, iqr):
    return {"value": median, "unit": "cycles", "evidence": f"40 accesses, IQR {iqr:.1f} cycles"}


def test_pattern_penalties_never_print_a_negative_cost():
    # P2 below P1 by 13 cycles with IQRs of 2 and 1: not a cost (the H200 case)
    result = {"P1": _pattern(300.0, 2.0), "P2": _pattern(287.0, 1.0), "P3": _pattern(380.0, 2.0)}
    lines = pattern_differences(result, "cg")
    assert "(P2 - P1): undetermined" in lines[0] and "negative" in lines[0]
    assert lines[1] == "an L2-TLB miss on top of it (P3 - P2): 93 cycles"
    for line in lines:
        assert not re.search(r": -\d+ cycles", line)


def test_ca_path_p2_minus_p1_is_not_called_the_tlb_penalty():
    result = {"P1": _pattern(116.0, 1.0), "P2": _pattern(398.0, 1.0)}
    (line,) = pattern_differences(result, "ca")
    assert "282 cycles between the patterns, not the TLB's penalty alone" in line


def test_fmt_units_and_two_decimals():
    assert fmt(16384, "bytes") == "16 KiB"
    assert fmt(222336, "bytes") == "217.12 KiB (222336 B)"
    assert fmt(1572864, "bytes") == "1.5 MiB"
    assert fmt(50.0, "cycles") == "50 cycles"
    assert fmt(50.006, "cycles") == "50.01 cycles"
    assert fmt([17, 8, 8]) == "17, 8, 8"


def _doc(elements, name="GeForce GTX 560 Ti", profile="gtx560ti"):
    return {"device_info": {"name": name, "profile": profile}, "elements": elements}


def test_summary_values_are_the_documents_values():
    docs = {
        "l1_size": _doc(
            {
                "l1d": {
                    "size_bytes": {"value": 12288, "unit": "bytes", "confidence": 0.987},
                    "hit_latency_cycles": {"value": 96.5, "unit": "cycles", "confidence": 1},
                }
            }
        ),
        "tlbs": _doc(
            {"l2_tlb": {"entries": {"value": None, "undetermined": "the walk never missed"}}}
        ),
    }
    blocks = device_summary("gtx560ti", docs, None)
    table = next(b for b in blocks if isinstance(b, Table))
    rows = {r[0]: r for r in table.rows}
    # config/papers/tpds_table5.yaml: GTX 560 Ti L1 16 KB, NPC Table 5 hit 116 cycles
    assert rows["L1 data size"] == (
        "L1 data size",
        "12 KiB",
        "0.99",
        "16 KiB",
        "differs: -4096 (-25.0 %)",
    )
    assert rows["L1 data hit latency"][1:4] == ("96.50 cycles", "1.00", "116 cycles")
    assert rows["L1 data hit latency"][4].startswith("differs: -19.50")
    assert rows["L2 TLB entries"][1] == "undetermined"
    bullets = next(b for b in blocks if isinstance(b, Bullets))
    assert bullets.items == ("`l2_tlb`: `entries` (tlbs): the walk never missed",)


def test_topology_table_only_when_there_is_a_document():
    docs = {"l1_size": _doc({"l1d": {"size_bytes": {"value": 2048, "unit": "bytes"}}})}
    without = device_summary("d", docs, None)
    topo = {"device": "d", "elements": {"l2": {"size_bytes": {"value": 2**21, "unit": "bytes"}}}}
    with_topo = device_summary("d", docs, topo)
    assert len(with_topo) == len(without) + 2  # the table and its notes
    (row,) = with_topo[1].rows
    assert row[:2] == ("L2", "2 MiB")


def test_undetermined_groups_quantities_of_one_reason():
    docs = {
        "caches": _doc(
            {
                "l2": {
                    "sets": {"value": None, "undetermined": "no stage 2"},
                    "policy": {"value": None, "undetermined": "no stage 2"},
                }
            }
        )
    }
    assert undetermined(docs) == ["`l2`: `sets`, `policy` (caches): no stage 2"]


def test_lookup_reads_contract_objects_and_plain_numbers():
    doc = {"elements": {"l1d": {"size_bytes": {"value": 8, "confidence": 0.5}}}, "x": {"y": 3}}
    assert lookup(doc, "elements.l1d.size_bytes") == Quantity(8, "", 0.5, "")
    assert lookup(doc, "x.y") == Quantity(3)
    assert lookup(doc, "elements.l2.size_bytes") is None


def test_markdown_lines_become_blocks_and_render_back():
    lines = [
        "### L2 footprint sweep",
        "",
        "| a | b |",
        "| --- | --- |",
        "| 1 | **2** |",
        "",
        "- first",
        "- second",
        "",
        "Some text",
        "continued.",
        "",
        "![fig](../figures/x.png)",
    ]
    blocks = from_markdown(lines, shift=-1)
    assert blocks == [
        Heading(2, "L2 footprint sweep"),
        Table(("a", "b"), (("1", "**2**"),)),
        Bullets(("first", "second")),
        Paragraph("Some text continued."),
        Figure("../figures/x.png", "fig"),
    ]
    md = render_markdown(Document("T", blocks))
    assert "### L2 footprint sweep" in md and "| 1 | **2** |" in md


def test_latex_escapes_and_marks():
    assert escape("50% of a_b & c#") == r"50\% of a\_b \& c\#"
    assert escape("128 → 130 × 2") == r"128 $\rightarrow$ 130 $\times$ 2"
    assert inline("**2 KiB** on `ca`") == r"\textbf{2 KiB} on \texttt{ca}"
    tex = render_latex(
        Document("T", [Heading(1, "S"), Table(("a", "b"), (("1", "2"),)), Figure("f.png", "c")])
    )
    assert r"\section{S}" in tex and r"\begin{longtable}" in tex
    # the figure without its extension: pdflatex takes the vector PDF beside the PNG
    assert "{f}" in tex and "f.png" not in tex


@pytest.mark.parametrize("text", ["a\u2264b", "\u2211"])
def test_latex_never_passes_a_glyph_the_fonts_lack(text):
    assert all(ord(c) < 0x100 for c in escape(text))


def test_the_summary_names_the_l2_tlb_entries_of_the_experiment_s_own_mapping():
    from gpudissect.report.summary import headline_rows

    q = {"value": 2051, "unit": "entries", "confidence": 0.9, "method": "m", "evidence": "e"}
    docs = {"tlb_mappings": {"elements": {"l2_tlb": {"entries": q}}}}
    ((h, got),) = headline_rows(docs)
    assert (h.label, got.value) == ("L2 TLB entries (own mapping)", 2051)
