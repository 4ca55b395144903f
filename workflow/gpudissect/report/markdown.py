"""Render a report `Document` to Markdown (GitHub flavour: pipe tables, anchors from headings)."""

from __future__ import annotations

import re

from .model import Bullets, Contents, Document, Figure, Heading, PageBreak, Paragraph, Table


def anchor(text: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to dashes."""
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(doc: Document) -> str:
    out = [f"# {doc.title}", ""]
    for block in doc.blocks:
        if isinstance(block, Heading):
            out += ["#" * (block.level + 1) + " " + block.text, ""]
        elif isinstance(block, Paragraph):
            out += [block.text, ""]
        elif isinstance(block, Bullets):
            out += [f"- {item}" for item in block.items] + [""]
        elif isinstance(block, Table):
            if block.caption:
                out += [f"*{block.caption}*", ""]
            out.append("| " + " | ".join(_cell(h) for h in block.header) + " |")
            out.append("| " + " | ".join("---" for _ in block.header) + " |")
            out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in block.rows]
            out.append("")
        elif isinstance(block, Figure):
            out += [f"![{block.caption}]({block.path})", "", f"*{block.caption}*", ""]
        elif isinstance(block, Contents):
            out += ["**Contents**", ""]
            for h in doc.blocks:
                if isinstance(h, Heading) and h.level == 1:
                    out.append(f"- [{h.text}](#{anchor(h.text)})")
            out.append("")
        elif isinstance(block, PageBreak):
            out += ["---", ""]
    return "\n".join(out)
