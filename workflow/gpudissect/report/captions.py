"""Figure captions. The plot step writes each figure's caption beside it (`<stem>.rst`): what
the figure draws, read back from the drawn figure (`plotting.describe`), then the explanatory
prose of `workflow/report/figures/<stem>.rst`, which says what the figure means and never what
it draws. The same text captions the figure in the Markdown/LaTeX report and in
`snakemake --report`."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from ..datafiles import CAPTIONS_DIR as CAPTIONS


@cache
def prose(stem: str) -> str:
    """The explanatory prose of a figure (rst; empty where the figure has none)."""
    path = CAPTIONS / f"{stem}.rst"
    return path.read_text().strip() if path.is_file() else ""


def caption_path(figure: Path) -> Path:
    """Where the plot step writes a figure's caption: beside it, `<stem>.rst`."""
    return Path(figure).with_suffix(".rst")


def _markdown(rst: str) -> str:
    return rst.strip().replace("``", "`")  # rst's literal marks are the report's code marks


def caption(stem: str, device: str, figure: Path | None = None) -> str:
    """The caption the report prints under a figure: the one written beside it, or (a figure
    drawn before captions were written with it) its stem and prose."""
    written = None if figure is None else caption_path(figure)
    if written is not None and written.is_file():
        text = written.read_text()
    else:
        text = f"``{stem}.png``: {prose(stem)}".strip()
    return f"{device}: {_markdown(text)}"
