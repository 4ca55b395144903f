"""Write the report: one `Document`, rendered to Markdown and LaTeX side by side (and its named
tables as CSV, for `snakemake --report`), and the PDF from the LaTeX through latexmk."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from ..exceptions import GpuDissectError
from .build import DeviceData, build_document
from .latex import render_latex
from .markdown import render_markdown
from .model import Document
from .studies import Study


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def write_tables(doc: Document, out_dir: Path, names: tuple[str, ...] = ()) -> list[Path]:
    """The named tables as CSV (`names`: write exactly these, an empty file for one this report
    lacks, so a rule's declared outputs always exist)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    tables = {t.name: t for t in doc.tables() if t.name}
    written = []
    for name in names or tuple(tables):
        path = out_dir / f"{name}.csv"
        tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
        with tmp.open("w", newline="") as fh:
            if name in tables:
                w = csv.writer(fh)
                w.writerow(tables[name].header)
                w.writerows(tables[name].rows)
        os.replace(tmp, path)
        written.append(path)
    return written


def render_report(
    devices: list[DeviceData],
    *,
    title: str,
    out: str | os.PathLike,
    studies: list[Study],
    tex: str | os.PathLike | None = None,
) -> Document:
    """`out` (Markdown) and `tex` (LaTeX; default beside it) from one document."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = build_document(devices, title=title, report_dir=out.parent, studies=studies)
    tex = Path(tex) if tex else out.with_suffix(".tex")
    if tex.parent.resolve() != out.parent.resolve():
        raise GpuDissectError(
            f"report: --tex {tex} must sit beside --out {out} (figure paths are relative)"
        )
    _write(out, render_markdown(doc))
    _write(tex, render_latex(doc))
    return doc


def compile_pdf(tex: str | os.PathLike, out: str | os.PathLike) -> Path:
    """`out` from `tex` with latexmk (pdflatex), built in a scratch folder beside the source so
    a failed run leaves neither a PDF nor auxiliary files behind."""
    tex, out = Path(tex).resolve(), Path(out)
    if shutil.which("latexmk") is None:
        raise GpuDissectError(
            "pdf: latexmk is not on PATH; install it with the TeX packages the report uses "
            "(Debian: apt-get install latexmk texlive-latex-recommended)"
        )
    with tempfile.TemporaryDirectory(dir=tex.parent, prefix=".latex-") as build:
        cmd = [
            "latexmk",
            "-pdf",
            "-interaction=nonstopmode",
            "-halt-on-error",
            f"-outdir={build}",
            tex.name,
        ]
        proc = subprocess.run(cmd, cwd=tex.parent, capture_output=True, text=True)
        pdf = Path(build) / f"{tex.stem}.pdf"
        if proc.returncode != 0 or not pdf.is_file():
            log = Path(build) / f"{tex.stem}.log"
            tail = log.read_text(errors="replace")[-3000:] if log.is_file() else proc.stdout[-3000:]
            raise GpuDissectError(f"pdf: {' '.join(cmd)} failed (exit {proc.returncode}):\n{tail}")
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(pdf), out.with_name(f".{out.name}.tmp{os.getpid()}"))
        os.replace(out.with_name(f".{out.name}.tmp{os.getpid()}"), out)
    return out
