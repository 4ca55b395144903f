"""Data files the package reads at run time: the config and profile schemas and the papers'
values the report compares against.

They travel inside the package (`gpudissect/data/`, package data of the wheel), so an installed
package finds them wherever it is installed; in the repository `data/schemas` and `data/papers`
are links to `config/schemas` and `config/papers`, the files users read and edit.
"""

from __future__ import annotations

from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent / "data"
SCHEMA_DIR = DATA_DIR / "schemas"
PAPERS_DIR = DATA_DIR / "papers"
CAPTIONS_DIR = DATA_DIR / "captions"  # links to workflow/report/figures (one .rst a figure)


def schema_file(name: str) -> Path:
    """`config/schemas/<name>` as shipped with the package."""
    return SCHEMA_DIR / name


def paper_file(name: str) -> Path:
    """`config/papers/<name>` as shipped with the package."""
    return PAPERS_DIR / name
