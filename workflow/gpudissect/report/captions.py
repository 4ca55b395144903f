"""Figure captions, one file per figure stem under workflow/report/figures/: the same text
captions the figure in the Markdown/LaTeX report and in `snakemake --report`."""

from __future__ import annotations

from functools import cache

from ..datafiles import CAPTIONS_DIR as CAPTIONS


@cache
def _text(stem: str) -> str:
    path = CAPTIONS / f"{stem}.rst"
    # rst's literal marks are the report's code marks
    return path.read_text().strip().replace("``", "`") if path.is_file() else f"`{stem}.png`"


def caption(stem: str, device: str) -> str:
    return f"{device}: {_text(stem)}"
