"""The report as data: a document is a list of blocks (headings, paragraphs, lists, tables,
figures), rendered to Markdown (`markdown.py`) and LaTeX (`latex.py`) from the same content.

Inline text uses two marks only, `**bold**` and `` `code` ``; both renderers understand them.
The family sections still write Markdown lines: `from_markdown` lifts them into blocks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Heading:
    level: int  # 1: part (summary, a study, a device, an appendix); 2-4: sections below it
    text: str


@dataclass(frozen=True)
class Paragraph:
    text: str


@dataclass(frozen=True)
class Bullets:
    items: tuple[str, ...]


@dataclass(frozen=True)
class Table:
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    caption: str = ""
    name: str = ""  # the stem of its CSV export, when it is one of the report's named tables


@dataclass(frozen=True)
class Figure:
    path: str  # relative to the report file
    caption: str
    wide: bool = False  # several panels side by side: it needs the whole line width


@dataclass(frozen=True)
class Contents:
    """The table of contents."""


@dataclass(frozen=True)
class PageBreak:
    pass


Block = Heading | Paragraph | Bullets | Table | Figure | Contents | PageBreak


@dataclass
class Document:
    title: str
    blocks: list[Block] = field(default_factory=list)

    def add(self, *blocks: Block) -> Document:
        self.blocks.extend(blocks)
        return self

    def tables(self) -> list[Table]:
        return [b for b in self.blocks if isinstance(b, Table)]

    def figures(self) -> list[Figure]:
        return [b for b in self.blocks if isinstance(b, Figure)]


_FIGURE = re.compile(r"^!\[(?P<alt>[^\]]*)\]\((?P<path>[^)]+)\)$")
_TABLE_NAME = re.compile(r"^<!-- table: (?P<name>[A-Za-z0-9_]+) -->$")


def _split_row(line: str) -> tuple[str, ...]:
    # a cell may hold a literal "|" only escaped; the sections never write one
    return tuple(c.strip() for c in line.strip().strip("|").split("|"))


def from_markdown(lines: list[str], *, shift: int = 0) -> list[Block]:
    """Blocks from the Markdown subset the family sections write: `#` headings (moved `shift`
    levels down), pipe tables, `- ` lists, `![alt](path)` figures and paragraphs."""
    blocks: list[Block] = []
    name = ""  # a `<!-- table: NAME -->` line names the table below it (its CSV export)
    i = 0
    while i < len(lines):
        line = lines[i].rstrip()
        if not line:
            i += 1
        elif m := _TABLE_NAME.match(line):
            name = m["name"]
            i += 1
        elif line.startswith("#"):
            hashes = len(line) - len(line.lstrip("#"))
            blocks.append(Heading(min(hashes + shift, 4), line[hashes:].strip()))
            i += 1
        elif line.startswith("|"):
            rows = []
            while i < len(lines) and lines[i].startswith("|"):
                rows.append(_split_row(lines[i]))
                i += 1
            body = [r for r in rows[1:] if not all(set(c) <= set("-: ") for c in r)]
            blocks.append(Table(rows[0], tuple(body), name=name))
            name = ""
        elif line.startswith("- "):
            items = []
            while i < len(lines) and lines[i].startswith(("- ", "  ")) and lines[i].strip():
                if lines[i].startswith("- "):
                    items.append(lines[i][2:].strip())
                else:  # a continuation line of the item above
                    items[-1] += " " + lines[i].strip()
                i += 1
            blocks.append(Bullets(tuple(items)))
        elif m := _FIGURE.match(line):
            blocks.append(Figure(m["path"], m["alt"]))
            i += 1
        else:
            text = [line]
            i += 1
            while (
                i < len(lines)
                and lines[i].strip()
                and not lines[i].startswith(("#", "|", "- ", "!["))
            ):
                text.append(lines[i].strip())
                i += 1
            blocks.append(Paragraph(" ".join(text)))
    return blocks
