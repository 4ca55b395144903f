"""The family registry: figure stems Snakemake plans match what the plot functions make, and a
stage's job does not import the libraries of other stages."""

import subprocess
import sys

import pytest

from gpudissect.exceptions import ConfigError
from gpudissect.families import FAMILIES, family


def test_figure_stems_match_the_plotting_modules():
    from gpudissect.plotting import caches, requests

    assert family("requests").figures == requests.REQUEST_FIGURES
    assert family("l2_flush").figures == requests.L2_FIGURES
    assert family("cache_stage1").figures == caches.STAGE1_FIGURES
    assert family("caches").figures == caches.CACHES_FIGURES


def test_every_reference_resolves():
    for fam in FAMILIES.values():
        for ref in (fam.parse_params, fam.run, fam.analyse, fam.plot, fam.report_section):
            assert callable(ref.resolve()), (fam.name, ref)
        assert fam.schema.names, fam.name
        assert isinstance(fam.kernels, tuple)


def test_unknown_family_is_refused_with_the_allowed_names():
    with pytest.raises(ConfigError, match="'nope' is unknown; allowed: .*l1_size"):
        family("nope")


@pytest.mark.parametrize(
    ("stage", "forbidden"),
    [
        ("parse_params", ("matplotlib", "seaborn", "scipy.stats")),
        ("analyse", ("matplotlib", "seaborn", "numba")),
    ],
)
def test_a_stage_imports_only_what_it_needs(stage, forbidden):
    code = (
        "import sys\n"
        "from gpudissect.families import FAMILIES\n"
        f"for f in FAMILIES.values(): f.{stage}.resolve()\n"
        f"print([m for m in {forbidden!r} if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_plot_pairs_experiments_traces_and_results(tmp_path, capsys):
    from gpudissect.cli import main

    rc = main(
        ["plot", "--experiment", "l1_size", "l2", "--trace", "t.parquet",
         "--analysis", "a.json", "b.json", "--out-dir", str(tmp_path)]
    )  # fmt: skip
    assert rc == 2
    assert "pair up in order; got 2, 1 and 2 values" in capsys.readouterr().err
