"""Render a report `Document` to LaTeX (pdflatex through latexmk; the packages it uses come
with Debian's texlive-latex-base and texlive-latex-recommended, the fonts are TeX's default
Computer Modern, so no font package is needed)."""

from __future__ import annotations

import re
import unicodedata

from .model import Bullets, Contents, Document, Figure, Heading, PageBreak, Paragraph, Table

PREAMBLE = r"""\documentclass[10pt,a4paper]{article}
\usepackage[margin=18mm]{geometry}
\usepackage[utf8]{inputenc}
\usepackage{textcomp}
\usepackage{amssymb}
\usepackage{array}
\usepackage{longtable}
\usepackage{booktabs}
\usepackage{graphicx}
\usepackage[hidelinks]{hyperref}
\setlength{\LTcapwidth}{\linewidth}
\setcounter{tocdepth}{1}
\setlength{\parindent}{0pt}
\setlength{\parskip}{4pt}
\raggedbottom
\sloppy
"""

_SECTION = {1: "section", 2: "subsection", 3: "subsubsection", 4: "paragraph"}

# characters the fonts of a plain pdflatex run lack, as LaTeX commands
_UNICODE = {
    "→": r"$\rightarrow$",
    "←": r"$\leftarrow$",
    "×": r"$\times$",
    "≥": r"$\geq$",
    "≤": r"$\leq$",
    "≈": r"$\approx$",
    "±": r"$\pm$",
    "−": r"$-$",
    "–": "--",
    "—": "---",
    "²": r"\textsuperscript{2}",
    "µ": r"$\mu$",
    "·": r"$\cdot$",
    "…": r"\dots{}",
    "’": "'",
    "‘": "`",
    "“": "``",
    "”": "''",
    "≠": r"$\neq$",
    "∞": r"$\infty$",
    "√": r"$\surd$",
    "Δ": r"$\Delta$",
}
_SPECIAL = {
    "\\": r"\textbackslash{}",
    "{": r"\{",
    "}": r"\}",
    "$": r"\$",
    "&": r"\&",
    "#": r"\#",
    "^": r"\textasciicircum{}",
    "_": r"\_",
    "%": r"\%",
    "~": r"\textasciitilde{}",
    "<": r"$<$",
    ">": r"$>$",
}


def escape(text: str) -> str:
    """Plain text as LaTeX: special characters escaped, symbols the fonts lack as commands."""
    out = []
    for ch in text:
        if ch in _SPECIAL:
            out.append(_SPECIAL[ch])
        elif ch in _UNICODE:
            out.append(_UNICODE[ch])
        elif ord(ch) > 0xFF:  # no glyph in the fonts: spell it out rather than fail the run
            out.append(f"[{unicodedata.name(ch, hex(ord(ch))).lower()}]")
        else:
            out.append(ch)
    return "".join(out)


def _code(text: str) -> str:
    # paths and identifiers are long: allow a line break after each separator
    parts = re.split(r"([/_.,=])", text)
    return (
        r"\texttt{"
        + "".join(escape(p) + (r"\allowbreak{}" if p in "/_.,=" and p else "") for p in parts)
        + "}"
    )


_INLINE = re.compile(r"\*\*(?P<bold>.+?)\*\*|`(?P<code>[^`]+)`")


def inline(text: str) -> str:
    """The report's inline marks (`**bold**`, `` `code` ``) as LaTeX, the rest escaped."""
    out, pos = [], 0
    for m in _INLINE.finditer(text):
        out.append(escape(text[pos : m.start()]))
        if m["bold"] is not None:
            out.append(r"\textbf{" + inline(m["bold"]) + "}")
        else:
            out.append(_code(m["code"]))
        pos = m.end()
    out.append(escape(text[pos:]))
    return "".join(out)


def _column_widths(table: Table, budget: int = 110) -> list[float]:
    """Fractions of the line width. Each column gets at least its longest word (so a header
    never runs into its neighbour) and at most its longest cell; what the line has left goes
    to the columns with long text (evidence), in proportion to how much more they hold."""
    n = len(table.header)
    cells = [[table.header[j]] + [r[j] if j < len(r) else "" for r in table.rows] for j in range(n)]
    # header words are bold (a fifth wider)
    least = [
        min(
            max(
                max(len(w) for w in (c.split() or [""])) * (1.2 if i == 0 else 1)
                for i, c in enumerate(col)
            ),
            24,
        )
        + 1
        for col in cells
    ]
    most = [max(min(max(len(c) for c in col), 80), m) for col, m in zip(cells, least, strict=True)]
    room = max(budget - sum(least), 0)
    extra = [mo - le for mo, le in zip(most, least, strict=True)]
    share = min(1.0, room / sum(extra)) if sum(extra) else 0.0
    widths = [le + share * ex for le, ex in zip(least, extra, strict=True)]
    return [w / sum(widths) for w in widths]


def _table(table: Table) -> list[str]:
    widths = _column_widths(table)
    # the columns share what the gaps between them leave of the line (no gap at either end)
    gaps = 2 * len(widths) - 2
    spec = "".join(
        r">{\raggedright\arraybackslash}"
        + rf"p{{\dimexpr(\linewidth-{gaps}\tabcolsep)*{round(w * 1000)}/1000\relax}}"
        for w in widths
    )
    size = r"\scriptsize" if len(widths) > 5 else r"\footnotesize"
    head = " & ".join(r"\textbf{" + inline(h) + "}" for h in table.header) + r" \\"
    lines = [
        "{" + size,
        r"\setlength{\tabcolsep}{4pt}",
        rf"\begin{{longtable}}{{@{{}}{spec}@{{}}}}",
    ]
    if table.caption:
        lines.append(r"\caption*{" + inline(table.caption) + r"}\\")
    lines += [r"\toprule", head, r"\midrule", r"\endhead"]
    for row in table.rows:
        cells = list(row) + [""] * (len(widths) - len(row))
        lines.append(" & ".join(inline(c) for c in cells[: len(widths)]) + r" \\")
    lines += [r"\bottomrule", r"\end{longtable}", "}"]
    return lines


def _figures(figs: list[Figure]) -> list[str]:
    """Figures two to a row (a device has up to 22: one per row would double the pages)."""
    out: list[str] = []
    rows: list[list[Figure]] = []
    for f in figs:  # a wide figure (several panels) takes a row of its own
        if f.wide or not rows or len(rows[-1]) == 2 or rows[-1][0].wide:
            rows.append([f])
        else:
            rows[-1].append(f)
    for row in rows:
        # no extension: pdflatex takes the figure's vector PDF where the rule drew one (a
        # fraction of the PNG's size and time), the PNG otherwise
        out.append(r"\par\noindent")
        width = "0.99" if row[0].wide else "0.49"
        for f in row:
            out += [
                rf"\begin{{minipage}}[t]{{{width}\linewidth}}\centering",
                r"\includegraphics[width=\linewidth,height=0.45\textheight,keepaspectratio]"
                + f"{{{f.path.removesuffix('.png')}}}\\\\",
                r"{\footnotesize " + inline(f.caption) + "}",
                r"\end{minipage}\hfill",
            ]
        out.append(r"\par\medskip")
    return out


def render_latex(doc: Document) -> str:
    out = [PREAMBLE, r"\begin{document}", r"\title{" + inline(doc.title) + "}", r"\date{}"]
    out += [r"\maketitle", r"\vspace{-8ex}"]
    pending: list[Figure] = []
    for block in doc.blocks:
        if isinstance(block, Figure):
            pending.append(block)
            continue
        out += _figures(pending)
        pending = []
        if isinstance(block, Heading):
            out.append(rf"\{_SECTION[block.level]}{{{inline(block.text)}}}")
        elif isinstance(block, Paragraph):
            out += [inline(block.text), ""]
        elif isinstance(block, Bullets):
            out.append(r"\begin{itemize}")
            out += [r"\item " + inline(item) for item in block.items]
            out.append(r"\end{itemize}")
        elif isinstance(block, Table):
            out += _table(block)
        elif isinstance(block, Contents):
            out.append(r"\tableofcontents")
        elif isinstance(block, PageBreak):
            out.append(r"\clearpage")
    out += _figures(pending)
    out += [r"\end{document}", ""]
    return "\n".join(out)
