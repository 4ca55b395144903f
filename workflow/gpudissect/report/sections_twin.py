"""The report's part on a GPU and its digital twin: per quantity, the GPU's value, the value the
pipeline recovers from the twin built from the GPU's topology, and agree / differ / assumed
(the agreement document of `gpudissect agreement`), with the open questions it raises."""

from __future__ import annotations

from typing import Any

from ..twin.agreement import agreement_table, counts_line
from .model import Block, Bullets, Heading, Paragraph, Table

ABOUT = (
    "The twin is the device profile generated from this GPU's topology document (`gpudissect "
    "twin`); the pipeline ran the topology's experiments on it. agree: the twin's run recovers "
    "the GPU's value; differ: it does not, because the twin does not model the quantity (the "
    "simulator has no mechanism for it, or what produces it was not measured) or because the "
    "analysis reads the twin differently from the value its profile carries; assumed: the "
    "GPU's run left the quantity undetermined, so the twin took a documented default "
    "(config/README.md). The full reasons are in the agreement document."
)


def twin_part(name: str, agreement: dict[str, Any]) -> list[Block]:
    header, rows = agreement_table(agreement)
    twin = agreement["twin"]["device"]
    blocks: list[Block] = [
        Heading(2, f"{name} and its twin"),
        Paragraph(f"{ABOUT} `{twin}`: {counts_line(agreement)}."),
        Table(header, tuple(rows), caption=f"{name}: GPU against twin, per quantity"),
    ]
    questions = agreement.get("open_questions") or []
    blocks.append(Paragraph("**Open questions** (the quantities that differ):"))
    blocks.append(Bullets(tuple(questions) if questions else ("none",)))
    return blocks
