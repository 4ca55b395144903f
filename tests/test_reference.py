"""The reference folders (`gpudissect reference`, gpudissect/reference.py): every README and the
fleet report are what their documents give (written again from the committed documents, they
are the committed files), and assembling a run makes the fixed layout, its pointers resolving in
the folder, or leaves the old folder when the run is incomplete."""

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from gpudissect.exceptions import ConfigError, GpuDissectError
from gpudissect.reference import (
    DEVICE,
    FIGURE_COLOURS,
    IMAGE,
    JOB_TIMES,
    MANIFEST,
    TWIN,
    assemble,
    check_name,
    readme,
)

REPO = Path(__file__).resolve().parents[1]
REFERENCE = REPO / "results" / "reference"
GPUS = sorted(p.name for p in REFERENCE.iterdir() if (p / "topology").is_dir())


def _colours(png: Path) -> set[int]:
    """The distinct colours of a PNG's pixels, each as one integer 0xRRGGBBAA."""
    import numpy as np
    from PIL import Image

    with Image.open(png) as image:
        rgba = np.asarray(image.convert("RGBA")).astype(np.uint32)
    return set(
        np.unique(
            (rgba[..., 0] << 24) | (rgba[..., 1] << 16) | (rgba[..., 2] << 8) | rgba[..., 3]
        ).tolist()
    )


def test_there_are_reference_gpus():
    assert {"h100", "h200"} <= set(GPUS)


@pytest.mark.parametrize("gpu", GPUS)
def test_each_readme_is_the_one_its_documents_give(gpu):
    folder = REFERENCE / gpu
    assert (folder / "README.md").read_text() == readme(folder, gpu)


@pytest.mark.parametrize("gpu", GPUS)
def test_the_readme_shows_the_documents_numbers(gpu):
    """Spot checks against the documents themselves, so that a README generator that printed
    numbers of its own would fail here even were it run again."""
    folder = REFERENCE / gpu
    text = (folder / "README.md").read_text()
    topo = json.loads((folder / "topology" / f"{DEVICE}.json").read_text())
    l1 = topo["elements"]["l1d"]
    for p in l1["size_bytes"].get("by_carveout", []):
        row = f"| {p['carveout_pct']}% | {p['shared_buffer_bytes']} | {p['value']} |"
        assert row in text
    for quantity in ("sets", "ways_per_set", "hit_latency_cycles"):
        entry = l1[quantity]
        if entry.get("value") is not None:
            shown = entry["value"][0] if isinstance(entry["value"], list) else entry["value"]
            assert f"  - {quantity}: {shown}" in text
    calibrated = l1["hit_latency_cycles"].get("calibrated_value")
    if calibrated is not None:
        assert f"{calibrated} calibrated" in text
    slices = topo["elements"]["l2"].get("slices", {}).get("value")
    if slices is not None:
        assert f"  - slices: {slices} (`l2_slices`)" in text
    agreement = json.loads((folder / "twin" / "agreement.json").read_text())
    assert f"{agreement['counts']['agree']} agree, {agreement['counts']['differ']} differ" in text
    timing = folder / "benchmarks" / "gpu_run.json"
    if timing.is_file():
        doc = json.loads(timing.read_text())
        assert f"took {doc['wall_s']} s of wall time" in text
        for name, seconds in doc["sweeps"].items():
            assert f"| {name} | {seconds} |" in text


def test_the_fleet_report_is_the_one_the_reference_folders_give():
    # beside the committed one: its figure links are relative to its folder
    out = REFERENCE / f".fleet-check-{os.getpid()}.md"
    try:
        _render_fleet(out)
        assert out.read_text() == (REFERENCE / "fleet.md").read_text()
        assert out.with_suffix(".tex").read_text() == (REFERENCE / "fleet.tex").read_text()
    finally:
        for p in REFERENCE.glob(f".fleet-check-{os.getpid()}.*"):
            p.unlink()


def _render_fleet(out: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "gpudissect", "report", "--reference", "results/reference"]
        + ["--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr


def _run_from_reference(root: Path, gpu: str = "h200") -> None:
    """A finished run's results/ and logs/ under `root`, made from a committed reference."""
    src = REFERENCE / gpu
    results = root / "results"
    for sub in ("traces", "analysis", "figures"):
        shutil.copytree(src / sub / DEVICE, results / sub / DEVICE)
    shutil.copytree(src / "twin" / "analysis" / TWIN, results / "analysis" / TWIN)
    shutil.copytree(src / "report", results / "report")
    # the run's benchmarks as Snakemake writes them: a file per job, which the folder keeps as
    # one table's rows
    bench = results / "benchmarks"
    shutil.copytree(src / "benchmarks", bench, ignore=shutil.ignore_patterns(JOB_TIMES))
    with (src / "benchmarks" / JOB_TIMES).open(newline="") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            job = bench / f"{row.pop('job')}.tsv"
            job.parent.mkdir(parents=True, exist_ok=True)
            job.write_text("\t".join(row) + "\n" + "\t".join(row.values()) + "\n")
    shutil.copytree(src / "logs", root / "logs")
    (results / "twins").mkdir()
    shutil.copy(src / "twin" / f"{gpu}_twin.yaml", results / "twins" / f"{DEVICE}.yaml")
    shutil.copy(src / "twin" / "accel-sim.config", results / "twins" / f"{DEVICE}.accel-sim.config")


@pytest.mark.skipif(not (REFERENCE / "h200" / MANIFEST).is_file(), reason="no assembled h200")
def test_assembling_a_run_makes_the_layout_with_pointers_into_the_folder(tmp_path):
    _run_from_reference(tmp_path)
    # a run's report also has its LaTeX and PDF, which the folder leaves to fleet.pdf
    for name in ("report.tex", "report.pdf"):
        (tmp_path / "results" / "report" / name).write_text("made by the run\n")
    out_root = tmp_path / "ref"
    # compaction at one zstd level: the committed folder is compacted already, this checks that
    # assembling compacts without changing a table (the levels' search is test_compact.py's)
    final = assemble("mygpu", root=tmp_path, out_root=out_root, compact_levels=(1,))
    assert final == out_root / "mygpu" and sorted(p.name for p in out_root.iterdir()) == ["mygpu"]
    for trace in sorted((tmp_path / "results" / "traces" / DEVICE).glob("*.parquet")):
        made = pq.read_table(final / "traces" / DEVICE / trace.name)
        assert made.equals(pq.read_table(trace), check_metadata=True), trace.name
    for path in (
        "README.md",
        MANIFEST,
        f"topology/{DEVICE}.json",
        f"topology/{DEVICE}.mt4g.json",
        f"traces/{DEVICE}/l2.parquet",
        "twin/mygpu_twin.yaml",
        "twin/accel-sim.config",
        "twin/agreement.json",
        "twin/agreement.md",
        f"twin/topology/{TWIN}.json",
        f"twin/analysis/{TWIN}/l2.json",
        "report/report.md",
        "benchmarks/gpu_run.json",
    ):
        assert (final / path).is_file(), path
    topo = json.loads((final / "topology" / f"{DEVICE}.json").read_text())
    pointers = [
        e["analysis"] for q in topo["elements"].values() for e in q.values() if "analysis" in e
    ]
    assert pointers and all(Path(p).is_file() for p in pointers)
    assert all(Path(p).is_relative_to(final / "analysis") for p in pointers)
    assert not (final / "twin" / "traces").exists()  # made again from the profile
    assert sorted(p.name for p in (final / "report").iterdir()) == ["report.md", "tables"]
    # every job's benchmark file is a row of one table, the same rows as committed
    assert not list((final / "benchmarks").rglob("*/*.tsv"))
    made = (final / "benchmarks" / JOB_TIMES).read_text()
    assert made == (REFERENCE / "h200" / "benchmarks" / JOB_TIMES).read_text()
    pngs = sorted((final / "figures" / DEVICE).glob("*.png"))
    assert pngs and all(len(_colours(p)) <= FIGURE_COLOURS for p in pngs)
    assert json.loads((final / MANIFEST).read_text())["command"] == "make reference GPU=mygpu"
    assert (final / "README.md").read_text() == readme(final, "mygpu")
    # every image the report shows is in the folder; the twin's figures it does not keep are
    # named in a line of their own
    report = (final / "report" / "report.md").read_text()
    images = IMAGE.findall(report)
    assert images and all((final / "report" / p).resolve().is_file() for p in images)
    unkept = (tmp_path / "results" / "report" / "report.md").read_text().count("gpu0_twin/")
    assert report.count("is not kept in this folder") > 0 and unkept > 0
    # the same run's agreement as committed: assembling does not change what it compares
    committed = json.loads((REFERENCE / "h200" / "twin" / "agreement.json").read_text())
    assert (
        json.loads((final / "twin" / "agreement.json").read_text())["counts"]
        == (committed["counts"])
    )


def test_an_incomplete_run_leaves_the_old_folder_and_no_partial_one(tmp_path):
    out_root = tmp_path / "ref"
    (out_root / "mygpu").mkdir(parents=True)
    (out_root / "mygpu" / "README.md").write_text("old\n")
    (tmp_path / "results" / "traces" / DEVICE).mkdir(parents=True)
    with pytest.raises(GpuDissectError, match=r"analysis/gpu0 is missing; the run did not make it"):
        assemble("mygpu", root=tmp_path, out_root=out_root)
    assert (out_root / "mygpu" / "README.md").read_text() == "old\n"
    assert sorted(p.name for p in out_root.iterdir()) == ["mygpu"]


@pytest.mark.parametrize("bad", ["", "H100", "../x", "a b", "-x"])
def test_a_bad_folder_name_is_refused_naming_what_is_allowed(bad):
    with pytest.raises(ConfigError, match=r"reference --gpu .*allowed: lower-case"):
        check_name(bad)


def test_make_reference_without_a_gpu_name_says_what_to_give():
    proc = subprocess.run(
        ["make", "-s", "reference", "VENV=/nonexistent-venv-for-the-test"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert proc.returncode != 0
    assert "give GPU=<folder name>" in proc.stdout + proc.stderr
