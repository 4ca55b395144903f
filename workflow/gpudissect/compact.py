"""Lossless compaction of a results folder (a GPU's reference folder), in place.

Parquet files are written again with, for each column, the encoding (dictionary, plain, or
delta for an integer column) and the zstd level that store it smallest; the table, its schema
and its metadata (a trace's provenance) read back equal, and every data page keeps its checksum.
PNG figures are written again at zlib's highest level with Pillow's optimizer: as RGB when no
pixel is transparent, through an exact palette when they hold at most 256 colours; the pixels
read back identical (compared as RGBA). Asked for `colours` (a reference folder: 256), an opaque
figure of more colours than that (the shades antialiasing puts between a line and the
background) is reduced to that many by median cut, undithered: the one lossy step, its largest
channel change reported per file. A file is replaced only when its new form is smaller and has
been read back equal (to the reduced pixels, where reduced); every rewrite goes through a
temporary file and a rename.
"""

from __future__ import annotations

import io
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .exceptions import GpuDissectError
from .traces import ZSTD_MAX_LEVEL, ColumnStorage, write_table

# zstd levels tried per column. No one level is best: an H200's request-sweep times, plainly
# encoded, stored 3.88 MB at level 1 and 4.43 MB at level 19, while most columns shrink with it.
COMPACT_LEVELS = (1, 3, 9, 19)


@dataclass(frozen=True)
class Compacted:
    """One file's outcome: its size before and after (equal when it was left as it was)."""

    path: Path
    before_bytes: int
    after_bytes: int
    # the largest change of one pixel's channel (0 to 255): 0 unless its colours were reduced
    max_channel_change: int = 0


def _replace(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        tmp.write_bytes(data)
        shutil.copystat(path, tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


# ---- Parquet ---------------------------------------------------------------------------------


def _leaf_path(column: pa.Table) -> str:
    """The Parquet leaf path of a one-column table ('elapsed_cycles.list.element' for a list)."""
    sink = pa.BufferOutputStream()
    pq.write_table(column.slice(0, 0), sink)
    schema = pq.ParquetFile(pa.BufferReader(sink.getvalue())).schema
    if len(schema) != 1:
        raise GpuDissectError(
            f"compact: column {column.schema.names[0]!r} has {len(schema)} leaves; only "
            "flat and list columns are compacted"
        )
    return schema.column(0).path


def _encoded_bytes(column: pa.Table, choice: ColumnStorage) -> int:
    sink = pa.BufferOutputStream()
    write_table(column, sink, storage=[choice])
    return sink.tell()


def choose_columns(
    table: pa.Table, levels: tuple[int, ...] = COMPACT_LEVELS
) -> list[ColumnStorage]:
    """Each column's smallest storage among dictionary, plain and (integer columns) delta
    encoding at each of `levels`, measured by writing the whole column alone."""
    bad = [lv for lv in levels if not (isinstance(lv, int) and 1 <= lv <= ZSTD_MAX_LEVEL)]
    if bad or not levels:
        raise GpuDissectError(
            f"compact: zstd levels {list(levels)!r} not allowed; give integers from 1 to "
            f"{ZSTD_MAX_LEVEL}"
        )
    choices = []
    for name in table.schema.names:
        column = table.select([name])
        leaf = _leaf_path(column)
        kind = table.schema.field(name).type
        encodings: list[str | None] = [None]
        if pa.types.is_integer(kind):
            encodings.append("DELTA_BINARY_PACKED")
        candidates = [ColumnStorage(leaf, True, None, lv) for lv in levels]
        candidates += [ColumnStorage(leaf, False, e, lv) for e in encodings for lv in levels]
        choices.append(min(candidates, key=lambda c: _encoded_bytes(column, c)))
    return choices


def _read(data: pa.Buffer | str | os.PathLike) -> pa.Table:
    source = pa.BufferReader(data) if isinstance(data, pa.Buffer) else data
    return pq.ParquetFile(source, page_checksum_verification=True).read()


def compact_parquet(
    path: str | os.PathLike, *, levels: tuple[int, ...] = COMPACT_LEVELS
) -> Compacted:
    """Write `path` again in its smallest form found (`choose_columns`), when that is smaller
    and reads back equal to the original, schema metadata included."""
    path = Path(path)
    before = path.stat().st_size
    table = _read(path)
    sink = pa.BufferOutputStream()
    write_table(table, sink, storage=choose_columns(table, levels))
    data = sink.getvalue()
    if data.size >= before:
        return Compacted(path, before, before)
    back = _read(data)
    if not back.equals(table, check_metadata=True):
        raise GpuDissectError(f"compact: {path} did not read back equal; left as it was")
    _replace(path, data.to_pybytes())
    return Compacted(path, before, data.size)


# ---- PNG -------------------------------------------------------------------------------------


def _rgba(image: Any) -> np.ndarray:
    return np.asarray(image.convert("RGBA"))


def _exact_palette(image: Any) -> Any | None:
    """The image in palette mode with exactly its own colours, when it has at most 256 and
    none is partly transparent; None otherwise."""
    from PIL import Image

    rgba = _rgba(image)
    if (rgba[..., 3] != 255).any():
        return None
    # each pixel's colour as one integer (0xRRGGBB): a 1-D unique is far quicker than rows'
    rgb = rgba[..., :3].astype(np.uint32)
    packed = ((rgb[..., 0] << 16) | (rgb[..., 1] << 8) | rgb[..., 2]).ravel()
    colours, index = np.unique(packed, return_inverse=True)
    if len(colours) > 256:
        return None
    palette = np.stack([colours >> 16, (colours >> 8) & 0xFF, colours & 0xFF], axis=1)
    out = Image.fromarray(index.reshape(rgba.shape[:2]).astype(np.uint8), mode="P")
    out.putpalette(palette.astype(np.uint8).tobytes())
    return out


def _png_bytes(image: Any, info: dict[str, Any]) -> bytes:
    from PIL import PngImagePlugin

    text = PngImagePlugin.PngInfo()
    for key, value in info.items():
        if isinstance(value, str):
            text.add_text(key, value)
    sink = io.BytesIO()
    kw = {"dpi": info["dpi"]} if "dpi" in info else {}
    image.save(sink, "PNG", optimize=True, pnginfo=text, **kw)
    return sink.getvalue()


def _reduced_palette(image: Any, colours: int) -> Any:
    """An opaque image's `colours` colours chosen by median cut, each pixel its nearest (no
    dithering: a flat area stays flat)."""
    from PIL import Image

    return image.convert("RGB").quantize(
        colors=colours, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE
    )


def compact_png(path: str | os.PathLike, *, colours: int | None = None) -> Compacted:
    """Write `path` again in its smallest pixel-identical form, keeping its text chunks and
    resolution; left as it was when no form is smaller. With `colours` (2 to 256), an opaque
    image of more colours is reduced to that many (`_reduced_palette`) first."""
    from PIL import Image

    if colours is not None and not (isinstance(colours, int) and 2 <= colours <= 256):
        raise GpuDissectError(
            f"compact: colours {colours!r} not allowed; give a whole number from 2 to 256, "
            "or None to keep every pixel"
        )
    path = Path(path)
    before = path.stat().st_size
    with Image.open(path) as image:
        image.load()
        info = dict(image.info)
        pixels = _rgba(image)
        forms = [image]
        if image.mode == "RGBA" and (pixels[..., 3] == 255).all():
            forms.append(image.convert("RGB"))
        target = pixels
        if (palette := _exact_palette(image)) is not None:
            forms.append(palette)
        elif colours is not None and (pixels[..., 3] == 255).all():
            forms = [_reduced_palette(image, colours)]
            target = _rgba(forms[0])
        best = min((_png_bytes(f, info) for f in forms), key=len)
    if len(best) >= before:
        return Compacted(path, before, before)
    with Image.open(io.BytesIO(best)) as back:
        if not np.array_equal(_rgba(back), target):
            raise GpuDissectError(f"compact: {path} did not read back pixel-identical; left")
    change = int(np.abs(target.astype(np.int16) - pixels.astype(np.int16)).max())
    _replace(path, best)
    return Compacted(path, before, len(best), change)


# ---- a folder --------------------------------------------------------------------------------


def _compact_one(path: Path, levels: tuple[int, ...], colours: int | None) -> Compacted:
    if path.suffix == ".parquet":
        return compact_parquet(path, levels=levels)
    return compact_png(path, colours=colours)


def usable_jobs(cores: int) -> int:
    """The files compacted at once for a run given `cores`: at most this machine's cores."""
    return max(1, min(cores, os.cpu_count() or 1))


def compact_folder(
    folder: str | os.PathLike,
    *,
    levels: tuple[int, ...] = COMPACT_LEVELS,
    jobs: int = 1,
    colours: int | None = None,
) -> list[Compacted]:
    """Compact every Parquet and PNG file under `folder` in place (hidden files skipped), in
    `jobs` processes at once, PNGs reduced to `colours` where they hold more (`compact_png`);
    the outcomes in path order."""
    folder = Path(folder)
    if not folder.is_dir():
        raise GpuDissectError(f"compact: {folder} is not a folder")
    if not (isinstance(jobs, int) and jobs >= 1):
        raise GpuDissectError(f"compact: jobs {jobs!r} not allowed; give a whole number >= 1")
    paths = [
        path
        for path in sorted(folder.rglob("*"))
        if path.is_file()
        and path.suffix in (".parquet", ".png")
        and not any(part.startswith(".") for part in path.relative_to(folder).parts)
    ]
    if jobs == 1 or len(paths) < 2:
        return [_compact_one(path, levels, colours) for path in paths]
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=min(jobs, len(paths))) as pool:
        n = len(paths)
        return list(pool.map(_compact_one, paths, [levels] * n, [colours] * n))


def summary(done: list[Compacted]) -> str:
    before = sum(c.before_bytes for c in done)
    after = sum(c.after_bytes for c in done)
    changed = sum(c.after_bytes < c.before_bytes for c in done)
    text = (
        f"{len(done)} files ({changed} rewritten): {before / 2**20:.2f} MiB -> "
        f"{after / 2**20:.2f} MiB"
    )
    reduced = [c for c in done if c.max_channel_change]
    if reduced:
        text += (
            f"; {len(reduced)} figures reduced to a palette (largest channel change "
            f"{max(c.max_channel_change for c in reduced)} of 255)"
        )
    return text
