"""The Thread-Latency figures' layout: the figure's title, each panel's title, and the panel
above's axis label do not overlap, for one panel and for many."""

import matplotlib
import pandas as pd
import pytest

matplotlib.use("Agg")

from gpudissect.plotting.requests import plot_thread_latency  # noqa: E402


def _table(pattern: str, ns: list[int]) -> pd.DataFrame:
    rows = []
    for n in ns:
        for threads in range(32, 2049, 32):
            latency = 300 + 0.1 * threads + (400 if threads > 1024 // n else 0)
            rows.append((pattern, n, threads, latency, (threads % 96) * 10.0))
    return pd.DataFrame(
        rows,
        columns=["pattern", "loads_per_thread", "threads", "latency_cycles", "variance_cycles2"],
    )


def _sweeps(pattern: str, ns: list[int]) -> list[dict]:
    # a long repeats note, as a GPU run's panels carry, makes the panel titles wide
    return [
        {
            "pattern": pattern,
            "loads_per_thread": n,
            "saturation_threads": 1024 // n,
            "repeats": {"text": "3 of 3 repeats"},
        }
        for n in ns
    ]


def _boxes(fig, axes):
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    suptitle = fig._suptitle.get_window_extent(renderer)
    titles = [ax.title.get_window_extent(renderer) for ax in axes]
    xlabels = [ax.xaxis.label.get_window_extent(renderer) for ax in axes]
    tops = [ax.get_window_extent(renderer) for ax in axes]
    return suptitle, titles, xlabels, tops


@pytest.mark.parametrize("ns", [[1], [1, 2], [1, 2, 4, 8, 16, 32, 64, 128]])
def test_no_title_overlaps_another(tmp_path, ns):
    fig, axes = plot_thread_latency(
        _table("merger4", ns),
        _sweeps("merger4", ns),
        pattern="merger4",
        title="gpu0: Thread-Latency, Merger4",
    )
    fig.savefig(tmp_path / f"requests_merger4_{len(ns)}.png", dpi=150)
    suptitle, titles, xlabels, panels = _boxes(fig, axes)
    height = fig.bbox.height
    assert suptitle.y1 <= height and all(t.y1 <= height for t in titles), "inside the figure"
    assert suptitle.y0 > titles[0].y1, "the figure's title sits above the first panel's"
    for title, panel in zip(titles, panels, strict=True):
        assert title.y0 >= panel.y1, "each panel's title above its panel"
    for below, above in zip(titles[1:], xlabels[:-1], strict=True):
        assert below.y1 < above.y0, "a panel's title below the x label of the panel above"
    assert xlabels[-1].y0 >= 0, "the last x label inside the figure"
