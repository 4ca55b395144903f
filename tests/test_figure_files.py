"""The plot step lays each figure out once and then only draws it for each format: the files are
those matplotlib's own savefig makes with the figure's layout engine on (PNG first, the PDF then
reusing the PNG's layout, as the step always saved them), and each savefig draws the figure
once."""

import json
from pathlib import Path

import matplotlib
import pandas as pd
import pytest

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from gpudissect.cli import _lay_out  # noqa: E402
from gpudissect.families import family  # noqa: E402

RUN = Path(__file__).resolve().parents[1] / "results/reference/h100"
# constrained layouts of one and several panels, a colourbar (l1_size, cache_sharing), shared
# axes (global_throughput) and a figure laid out by tight_layout with no engine (cache_sharing)
EXPERIMENTS = ("l1_size", "cache_sharing", "global_throughput", "bank_conflicts")
NO_DATE = {"CreationDate": None}  # a PDF otherwise carries the time it was written


def _figures(name: str) -> dict:
    fam = family(name)
    data = pd.read_parquet(RUN / f"traces/gpu0/{name}.parquet")
    result = RUN / f"analysis/gpu0/{name}.json"
    doc = json.loads(result.read_text())
    if fam.table is not None:
        return fam.plot(data, doc, table=pd.read_parquet(result.with_suffix(".parquet")))
    return fam.plot(data, doc)


def _save_with_engine(fig, png: Path, pdf: Path) -> None:
    fig.savefig(png, dpi=150)  # savefig lays the figure out in a draw of its own
    fig.set_layout_engine("none")
    fig.savefig(pdf, dpi=150, metadata=NO_DATE)


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_one_layout_gives_the_files_that_savefig_lays_out_itself(name, tmp_path, monkeypatch):
    reference = _figures(name)
    ours = _figures(name)
    draws = []
    draw = Figure.draw
    monkeypatch.setattr(
        Figure, "draw", lambda self, renderer: draws.append(1) or draw(self, renderer)
    )
    for stem, fig in reference.items():
        _save_with_engine(fig, tmp_path / f"{stem}.ref.png", tmp_path / f"{stem}.ref.pdf")
        plt.close(fig)
    for stem, fig in ours.items():
        _lay_out(fig, dpi=150)
        assert fig.get_layout_engine() is None, stem
        draws.clear()
        fig.savefig(tmp_path / f"{stem}.png", dpi=150)
        fig.savefig(tmp_path / f"{stem}.pdf", dpi=150, metadata=NO_DATE)
        assert len(draws) == 2, (stem, len(draws))  # one draw per file
        plt.close(fig)
        for ext in ("png", "pdf"):
            ref = (tmp_path / f"{stem}.ref.{ext}").read_bytes()
            assert (tmp_path / f"{stem}.{ext}").read_bytes() == ref, (stem, ext)


def test_the_plot_step_writes_the_same_bytes_whenever_it_runs(tmp_path, monkeypatch):
    from gpudissect.cli import _draw_experiment

    trace = RUN / "traces/gpu0/l2_flush.parquet"
    analysis = RUN / "analysis/gpu0/l2_flush.json"
    files = {}
    for day, epoch in enumerate(("0", "86400")):  # the clock a PDF would otherwise record
        monkeypatch.setenv("SOURCE_DATE_EPOCH", epoch)
        out = tmp_path / str(day)
        out.mkdir()
        _draw_experiment("l2_flush", str(trace), str(analysis), str(out), ("png", "pdf", "svg"))
        files[day] = {p.name: p.read_bytes() for p in sorted(out.iterdir())}
    assert {name[-3:] for name in files[0]} >= {"png", "pdf", "svg"}
    assert files[0] == files[1]
