"""Compaction is lossless: Parquet tables (schema, metadata, provenance, page checksums) and
PNG pixels read back identical, and a file is replaced only by a smaller form of itself."""

import json
import subprocess
import sys
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from PIL import Image  # noqa: E402

from gpudissect.compact import compact_folder, compact_parquet, compact_png, summary  # noqa: E402
from gpudissect.exceptions import GpuDissectError, TraceError  # noqa: E402
from gpudissect.experiments import requests  # noqa: E402
from gpudissect.traces import METADATA_KEY, read_trace, write_trace  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
PROV = {
    "package_version": "0",
    "git_commit": "abc1234",
    "config_hash": "f00",
    "host": "h",
    "experiment": "requests",
    "device": "gpu0",
    "device_info": {"name": "Test GPU", "uuid": "GPU-0000", "arch": "sm_90"},
}


def _requests_frame(rows=600, seed=1):
    """A request sweep's shape: labels, counters that grow, and per-thread times that repeat
    a few hundred distinct values (as a GPU's do)."""
    rng = np.random.default_rng(seed)
    threads = np.repeat(np.arange(1, rows // 20 + 1, dtype=np.int16) * 32, 20)[:rows]
    times = [rng.choice(np.arange(400, 700, 3), size=int(t)).astype(np.uint32) for t in threads]
    return pd.DataFrame(
        {
            "point": np.arange(rows, dtype=np.int32) // 3,
            "repeat": (np.arange(rows) % 3).astype(np.int8),
            "pattern": np.where(np.arange(rows) % 2, "unique", "merger4"),
            "merge_threads": np.full(rows, 4, np.int16),
            "loads_per_thread": np.ones(rows, np.int8),
            "threads": threads,
            "blocks": np.ones(rows, np.int16),
            "block_threads": threads,
            "run": np.zeros(rows, np.int8),
            "block_bytes": np.full(rows, 4096, np.int32),
            "footprint_bytes": threads.astype(np.int64) * 128,
            "elapsed_cycles": times,
            "sm_clock_mhz": np.full(rows, 1980.0, np.float32),
        }
    )


def _trace(path, **kw):
    return write_trace(path, _requests_frame(), schema=requests.SCHEMA, provenance=PROV, **kw)


def test_a_compacted_trace_reads_back_the_same_table_schema_and_provenance(tmp_path):
    path = _trace(tmp_path / "requests.parquet")
    before_table = pq.read_table(path)
    before_bytes = path.stat().st_size
    done = compact_parquet(path)
    assert done.before_bytes == before_bytes and done.after_bytes == path.stat().st_size
    assert done.after_bytes < before_bytes  # the repeated times store smaller by dictionary
    after_table = pq.read_table(path)
    assert after_table.equals(before_table, check_metadata=True)
    assert after_table.schema.metadata[METADATA_KEY] == before_table.schema.metadata[METADATA_KEY]
    trace = read_trace(path, schema=requests.SCHEMA)  # schema and provenance checks pass
    assert trace.provenance["git_commit"] == "abc1234"
    assert trace.provenance["device_info"]["uuid"] == "GPU-0000"
    pd.testing.assert_frame_equal(trace.data, read_trace(path).data)
    meta = pq.ParquetFile(path).metadata
    for i in range(meta.num_columns):
        assert meta.row_group(0).column(i).compression == "ZSTD"
    assert not list(tmp_path.glob(".*tmp*")), "no temporary file left behind"


def test_a_damaged_compacted_page_is_refused_naming_its_column(tmp_path):
    path = _trace(tmp_path / "requests.parquet")
    compact_parquet(path)
    meta = pq.ParquetFile(path).metadata.row_group(0)
    column = next(
        meta.column(i)
        for i in range(meta.num_columns)
        if "elapsed_cycles" in meta.column(i).path_in_schema
    )
    start = column.dictionary_page_offset or column.data_page_offset
    data = bytearray(path.read_bytes())
    middle = start + column.total_compressed_size // 2
    data[middle] ^= 0xFF  # one flipped byte inside the column's pages
    path.write_bytes(bytes(data))
    with pytest.raises(TraceError, match=r"column 'elapsed_cycles' is corrupted"):
        read_trace(path)


def test_a_file_already_in_its_smallest_form_is_left_byte_for_byte(tmp_path):
    path = _trace(tmp_path / "requests.parquet")
    compact_parquet(path)
    once = path.read_bytes()
    again = compact_parquet(path)
    assert again.after_bytes == again.before_bytes and path.read_bytes() == once


def test_a_tidy_table_keeps_its_pandas_metadata(tmp_path):
    path = tmp_path / "t.parquet"
    frame = pd.DataFrame({"x": np.arange(5000) % 7, "label": ["a", "b"] * 2500})
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, compression="none")
    compact_parquet(path)
    back = pq.read_table(path)
    assert b"pandas" in back.schema.metadata
    pd.testing.assert_frame_equal(back.to_pandas(), frame)


def test_the_trace_writer_takes_a_zstd_level_and_refuses_one_out_of_range(tmp_path):
    path = _trace(tmp_path / "a.parquet", compression_level=19)
    pd.testing.assert_frame_equal(read_trace(path).data, _requests_frame())
    for bad in (0, 23, "high"):
        with pytest.raises(TraceError, match=rf"compression_level {bad!r} not allowed; give an"):
            _trace(tmp_path / "b.parquet", compression_level=bad)
    assert not (tmp_path / "b.parquet").exists()


def test_compaction_refuses_levels_out_of_range(tmp_path):
    path = _trace(tmp_path / "requests.parquet")
    with pytest.raises(GpuDissectError, match=r"zstd levels \[0, 30\] not allowed"):
        compact_parquet(path, levels=(0, 30))


def _figure_png(path, *, transparent=False):
    fig, ax = plt.subplots(figsize=(4, 3), dpi=100)
    x = np.linspace(0, 6, 200)
    ax.plot(x, np.sin(x))
    ax.set_title("a figure")
    fig.savefig(path, dpi=100, transparent=transparent)
    plt.close(fig)
    return path


def _blocks_png(path):
    """An opaque RGBA image of five flat colours, saved as matplotlib saves (dpi, Software)."""
    from PIL import PngImagePlugin

    colours = np.array(
        [[255, 255, 255], [31, 119, 180], [255, 127, 14], [44, 160, 44], [0, 0, 0]], np.uint8
    )
    index = (np.arange(300)[:, None] // 60 + np.arange(400)[None, :] // 80) % 5
    rgba = np.dstack([colours[index], np.full(index.shape, 255, np.uint8)])
    text = PngImagePlugin.PngInfo()
    text.add_text("Software", "Matplotlib version3.8, https://matplotlib.org/")
    Image.fromarray(rgba, mode="RGBA").save(path, pnginfo=text, dpi=(150, 150))
    return path


def _rgba(path):
    with Image.open(path) as im:
        return np.asarray(im.convert("RGBA")), dict(im.info), im.mode


@pytest.mark.parametrize(
    "kind", ["opaque", "transparent", "few colours"], ids=["opaque", "transparent", "palette"]
)
def test_a_compacted_png_has_the_same_pixels_text_and_resolution(tmp_path, kind):
    if kind == "few colours":
        path = _blocks_png(tmp_path / "f.png")
    else:
        path = _figure_png(tmp_path / "f.png", transparent=kind == "transparent")
    pixels, info, mode = _rgba(path)
    assert mode == "RGBA"
    before = path.stat().st_size
    done = compact_png(path)
    after_pixels, after_info, after_mode = _rgba(path)
    assert np.array_equal(after_pixels, pixels)
    assert after_info["Software"] == info["Software"]
    assert np.allclose(after_info["dpi"], info["dpi"], atol=0.01)
    assert done.after_bytes == path.stat().st_size <= before
    if kind == "transparent":
        assert after_mode == "RGBA"  # alpha carries information here and stays
    elif kind == "few colours":
        assert after_mode == "P" and done.after_bytes < before
    else:
        assert after_mode in ("RGB", "P") and done.after_bytes < before


def test_a_folder_is_compacted_in_place_hidden_files_left_alone(tmp_path):
    traces = tmp_path / "traces" / "gpu0"
    traces.mkdir(parents=True)
    trace = _trace(traces / "requests.parquet")
    hidden = _trace(tmp_path / ".partial.parquet")
    hidden_bytes = hidden.read_bytes()
    (tmp_path / "figures").mkdir()
    png = _figure_png(tmp_path / "figures" / "f.png")
    (tmp_path / "notes.md").write_text("kept\n")
    done = compact_folder(tmp_path)
    assert sorted(c.path for c in done) == sorted([trace, png])
    assert hidden.read_bytes() == hidden_bytes
    assert (tmp_path / "notes.md").read_text() == "kept\n"
    with pytest.raises(GpuDissectError, match=r"compact: .*missing is not a folder"):
        compact_folder(tmp_path / "missing")


def test_the_cli_compacts_a_reference_folder_in_place(tmp_path):
    folder = tmp_path / "mygpu"
    trace = _trace(folder / "traces" / "gpu0" / "requests.parquet")
    table = pq.read_table(trace)
    before = trace.stat().st_size
    proc = subprocess.run(
        [sys.executable, "-m", "gpudissect", "reference", "--compact-only", str(folder)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr
    assert "1 files (1 rewritten)" in proc.stdout
    assert trace.stat().st_size < before
    assert pq.read_table(trace).equals(table, check_metadata=True)
    prov = json.loads(pq.read_schema(trace).metadata[METADATA_KEY])
    assert prov["git_commit"] == "abc1234"


def test_the_cli_refuses_a_compaction_of_no_folder(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "gpudissect", "reference", "--compact-only", str(tmp_path / "x")],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert proc.returncode != 0
    assert "is not a folder" in proc.stderr


def test_reference_without_a_gpu_or_a_folder_to_compact_says_what_to_give():
    proc = subprocess.run(
        [sys.executable, "-m", "gpudissect", "reference", "--readme-only"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert proc.returncode != 0
    assert "reference: give --gpu NAME (the folder's name, e.g. h100), or --compact-only DIR" in (
        proc.stderr
    )


def test_a_folder_compacted_in_two_processes_is_the_one_compacted_in_one(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    for folder in (one, two):
        _trace(folder / "traces" / "requests.parquet")
        write_trace(
            folder / "traces" / "other.parquet",
            _requests_frame(rows=200, seed=2),
            schema=requests.SCHEMA,
            provenance=PROV,
        )
        (folder / "figures").mkdir()
        _blocks_png(folder / "figures" / "f.png")
    serial = compact_folder(one)
    parallel = compact_folder(two, jobs=2)
    assert [c.path.relative_to(one) for c in serial] == [c.path.relative_to(two) for c in parallel]
    for a, b in zip(serial, parallel, strict=True):
        assert a.path.read_bytes() == b.path.read_bytes()
    with pytest.raises(GpuDissectError, match=r"compact: jobs 0 not allowed; give a whole"):
        compact_folder(one, jobs=0)


def _shaded_png(path):
    """An opaque figure of far more than 256 colours: antialiased lines over a colour map."""
    fig, ax = plt.subplots(figsize=(4, 3), dpi=100)
    ax.imshow(np.linspace(0, 1, 4096).reshape(64, 64), cmap="viridis")
    for k in range(6):
        ax.plot(np.linspace(0, 63, 200), 30 + 20 * np.sin(np.linspace(0, 6, 200) + k), lw=1.5)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _distinct(pixels):
    flat = pixels.reshape(-1, pixels.shape[-1]).astype(np.uint32)
    return len(np.unique((flat[:, 0] << 24) | (flat[:, 1] << 16) | (flat[:, 2] << 8) | flat[:, 3]))


def test_a_figure_of_many_colours_is_reduced_to_the_palette_asked_and_says_by_how_much(tmp_path):
    path = _shaded_png(tmp_path / "f.png")
    pixels, info, _ = _rgba(path)
    assert _distinct(pixels) > 256 and (pixels[..., 3] == 255).all()
    before = path.stat().st_size
    lossless = compact_png(path)  # without colours every pixel stays
    assert np.array_equal(_rgba(path)[0], pixels) and lossless.max_channel_change == 0
    done = compact_png(path, colours=256)
    after, after_info, mode = _rgba(path)
    assert mode == "P" and _distinct(after) <= 256
    assert done.after_bytes == path.stat().st_size < before
    change = np.abs(after.astype(int) - pixels.astype(int)).max()
    assert done.max_channel_change == change > 0
    # the reduction moves shades, not the picture: a pixel's channels by under 1 of 255 on average
    assert np.abs(after.astype(int) - pixels.astype(int)).mean() < 1.0
    assert after_info["Software"] == info["Software"]
    assert "reduced to a palette (largest channel change" in summary([done])


def test_a_transparent_figure_keeps_every_pixel_even_when_a_palette_is_asked(tmp_path):
    path = _figure_png(tmp_path / "f.png", transparent=True)
    pixels = _rgba(path)[0]
    done = compact_png(path, colours=256)
    assert np.array_equal(_rgba(path)[0], pixels) and done.max_channel_change == 0


@pytest.mark.parametrize("bad", [1, 257, 0, "256", 2.5])
def test_a_palette_outside_2_to_256_colours_is_refused(tmp_path, bad):
    path = _blocks_png(tmp_path / "f.png")
    with pytest.raises(GpuDissectError, match=r"compact: colours .* not allowed; give a whole"):
        compact_png(path, colours=bad)
