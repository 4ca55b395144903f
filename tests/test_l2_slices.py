"""L2 slice map: the GF(2) fit on seeded labels, the sliced L2 of the simulator (engine against
the reference model; profiles without the block unchanged; bad blocks refused), the family on a
small twin whose partition function, partitions, slices and SM x slice matrix the analysis must
recover from the trace alone, the sweep's second helper, undetermined results on a trace with no
structure, and a GPU check (`pytest -m gpu`)."""

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from gpudissect.analysis.l2.l2_partition import fit_affine
from gpudissect.analysis.l2.l2_slices import analyse, figure_table
from gpudissect.backends.sim import SimBackend
from gpudissect.contract.backend import Backend, handles
from gpudissect.contract.facts import DeviceFacts
from gpudissect.exceptions import ConfigError, ProfileError
from gpudissect.experiments import l2_slices as e

REPO = Path(__file__).resolve().parents[1]
TWIN = REPO / "tests/data/l2_slices_twin.yaml"
PARAMS = e.L2SliceParams(
    enabled=True,
    lines=512,
    region_bytes=2 << 20,
    repetitions=2,
    sms=None,
    flush_bytes=None,
    line_seed=1,
)


def _parity(x: int) -> int:
    return bin(x).count("1") & 1


def test_affine_fit_recovers_a_mask_and_counts_the_lines_noise_misplaced():
    rng = np.random.default_rng(5)
    offsets = rng.choice(16384, 1024, replace=False).astype(np.int64) * 128
    mask = (1 << 8) | (1 << 12) | (1 << 20)
    far = np.array([_parity(int(o) & mask) == 0 for o in offsets])  # constant 1
    flipped = far.copy()
    flipped[[3, 99, 500]] ^= True
    fit = fit_affine(offsets, flipped)
    assert (fit.mask, fit.constant, fit.mismatches) == (mask, 1, 3)
    assert fit.bits == [8, 12, 20] and fit.linear
    assert (fit.predict(offsets) == far).all()


def test_affine_fit_calls_an_and_of_two_bits_not_linear():
    rng = np.random.default_rng(6)
    offsets = rng.choice(16384, 1024, replace=False).astype(np.int64) * 128
    far = (offsets >> 9 & 1).astype(bool) & (offsets >> 14 & 1).astype(bool)
    fit = fit_affine(offsets, far)
    # the best affine approximation of an AND misplaces a quarter of the points
    assert not fit.linear
    assert 0.2 * far.size < fit.mismatches < 0.3 * far.size


def test_engine_and_reference_model_give_the_same_sliced_latencies():
    from gpudissect.sim.engine import SimGPU
    from gpudissect.sim.hierarchy import MemoryHierarchy
    from gpudissect.sim.profile import load_profile

    profile = load_profile(TWIN)
    addrs = np.arange(48, dtype=np.int64) * 4224  # lines spread over the slice bits
    for sm in (0, 5):
        gpu, ref = SimGPU(profile, seed=2), MemoryHierarchy(profile, seed=2)
        gpu.load_sequence("cg", addrs, sm=sm)
        for a in addrs:
            ref.load("cg", int(a), sm=sm)
        fast = gpu.load_sequence("cg", addrs, sm=sm)
        slow = [ref.load("cg", int(a), sm=sm) for a in addrs]
        assert fast.tolist() == slow


def test_a_profile_without_slices_gives_every_sm_the_same_latencies():
    from gpudissect.sim.engine import SimGPU
    from gpudissect.sim.profile import load_profile

    profile = load_profile(REPO / "tests/data/h100_like.yaml")
    addrs = np.arange(64, dtype=np.int64) * 128
    a = SimGPU(profile, seed=4).load_sequence("cg", np.tile(addrs, 2), sm=0)
    b = SimGPU(profile, seed=4).load_sequence("cg", np.tile(addrs, 2), sm=77)
    assert a.tolist() == b.tolist()


def test_a_block_with_too_few_sm_entries_is_refused_naming_the_key(tmp_path):
    doc = yaml.safe_load(TWIN.read_text())
    doc["l2_slices"]["sm_partition"] = [0, 1]
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(doc))
    from gpudissect.sim.profile import load_profile

    with pytest.raises(ProfileError, match=r"l2_slices\.sm_partition: has 2 entries.*: 8"):
        load_profile(bad)


def test_bad_parameters_are_refused_naming_the_key():
    base = {
        "enabled": True, "lines": 64, "region_bytes": 4096, "repetitions": 1, "sms": "auto",
        "flush_bytes": "auto", "line_seed": 0, "contention_lines": 0, "contention_iterations": 16,
    }  # fmt: skip
    with pytest.raises(ConfigError, match=r"l2_slices\.lines: 64; allowed: at most .* 32 lines"):
        e.parse_params(base, "l2_slices")
    with pytest.raises(ConfigError, match=r"l2_slices\.sms: \[1, 1\] repeats"):
        e.parse_params(base | {"lines": 16, "sms": [1, 1]}, "l2_slices")


@pytest.fixture(scope="module")
def twin():
    with SimBackend(profile_path=TWIN, seed=11) as backend:
        data = e.run(backend, PARAMS, device=None)
    return data, analyse(data, provenance={"device": "twin"})


def test_the_twin_partition_function_and_partitions_are_recovered(twin):
    data, doc = twin
    l2 = doc["elements"]["l2"]
    # slice_partition = slice bit 0 XOR slice bit 2: masks 0x88880 ^ 0x22200 = 0xaaa80
    assert l2["partition_function"]["value"] == [7, 9, 11, 13, 15, 17, 19]
    assert l2["partitions"]["value"] == 2
    # sm_partition [0, 1, 1, 0, 0, 1, 1, 0]
    assert sorted(doc["near_groups"]) == [[0, 3, 4, 7], [1, 2, 5, 6]]
    assert set(data["phase"]) == {0}  # every SM split with the first helper: no second phase
    assert (data["sm"] == data["target_sm"]).all()


def test_the_twin_slices_and_matrix_are_recovered(twin):
    data, doc = twin
    assert doc["elements"]["l2"]["slices"]["value"] == 16
    p = yaml.safe_load(TWIN.read_text())["l2_slices"]
    cols = doc["columns"]
    masks = p["index"]["masks"]
    true_slice = np.array(
        [sum(_parity(o & m) << k for k, m in enumerate(masks)) for o in cols["offsets_bytes"]]
    )
    column = np.asarray(cols["column"])
    slice_of_column = {}
    for k in range(16):
        slices = set(true_slice[column == k])
        assert len(slices) == 1, (k, slices)  # every class is one slice
        slice_of_column[k] = slices.pop()
    table = figure_table(data, doc)
    # the latency the profile gives: 260 + SM term + slice term + 200 to the other partition
    sl = table["column"].map(slice_of_column)
    far = sl.map(lambda k: p["slice_partition"][k]) != table["sm"].map(
        lambda s: p["sm_partition"][s]
    )
    want = (
        260 + table["sm"].map(lambda s: p["sm_cycles"][s]) + sl.map(lambda k: p["slice_cycles"][k])
    ) + 200 * far
    assert np.abs(table["cycles"] - want).max() <= 1.5
    assert (table["far"] == far).all()
    fits = doc["model"]["fits"]
    assert fits["additive_far"]["r2"] > 0.999 and fits["additive"]["r2"] < 0.5
    assert abs(doc["elements"]["l2"]["far_penalty_cycles"]["value"] - 200) < 1


def test_the_twin_report_section_and_figure(twin):
    from gpudissect.plotting.describe import caption_mismatches, caption_text
    from gpudissect.plotting.l2_slices import FIGURE, plot_l2_slices
    from gpudissect.report.captions import prose
    from gpudissect.report.sections_slices import l2_slices_section

    data, doc = twin
    text = "\n".join(l2_slices_section(doc, []))
    assert "a7 XOR a9 XOR a11" in text and "| slices (latency classes) | 16 |" in text
    figs = plot_l2_slices(data, doc, table=figure_table(data, doc))
    assert set(figs) == {FIGURE}
    text = caption_text(figs[FIGURE], FIGURE, prose(FIGURE))
    assert not caption_mismatches(figs[FIGURE], text), text


class _FakeBackend(Backend):
    """A GPU whose L2 copies far lines into the reader's partition: after a warm-up from the
    helper, an SM of the helper's partition reads every line near (SMs 0-3: partition 0, 4-7:
    partition 1; line partition = address bit 7)."""

    kind = "fake_l2"

    def device_info(self):
        return {"backend": "fake"}

    def facts(self):
        return DeviceFacts(source="driver", name="fake", compute_capability=None, sm_count=8,
                           max_threads_per_sm=2048, l2_bytes=1 << 20)  # fmt: skip

    supports_carveout = False

    def run_chase(self, work, *, carveout_pct, seed=0):
        raise NotImplementedError

    def clocks(self):
        return {"sm_clock_mhz": 1000.0, "memory_clock_mhz": 1000.0}


@handles("fake_l2", e.L2SliceWork)
def _fake_walk(backend, work, *, seed=0):
    part = lambda sm: sm // 4  # noqa: E731
    line_part = (work.offsets_bytes >> 7 & 1).astype(int)
    if part(work.helper_sm) == part(work.target_sm):
        first = np.full(work.lines, 300)
    else:
        first = np.where(line_part == part(work.target_sm), 300, 520)
    cycles = np.concatenate([first, np.full(work.lines, 300)]).astype(np.uint32)
    return e.L2SliceResult(cycles, work.target_sm, work.helper_sm, 1000.0)


def test_the_sweep_walks_the_helper_s_partition_again_with_a_helper_of_the_other():
    data = e.run(_FakeBackend(), PARAMS, device=None)
    again = data[data["phase"] == 1]
    assert sorted(set(again["target_sm"])) == [0, 1, 2, 3]
    assert set(again["helper_sm"]) == {4}  # the first SM whose first touch split
    doc = analyse(data, provenance={"device": "fake"})
    assert doc["elements"]["l2"]["partition_function"]["value"] == [7]
    assert sorted(doc["near_groups"]) == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_a_trace_without_structure_leaves_everything_undetermined():
    rng = np.random.default_rng(8)
    n, sms, reps = 256, 4, 2
    offsets = rng.choice(16384, n, replace=False) * 128
    rows = [
        (0, 0, s, s, r, p, i, offsets[i], 300 + rng.normal(0, 2), 2 << 20, 1000.0, -1, -1.0)
        for s in range(sms) for r in range(reps) for p in range(2) for i in range(n)
    ]  # fmt: skip
    data = pd.DataFrame(rows, columns=e.SCHEMA.names)
    l2 = analyse(data, provenance={"device": "noise"})["elements"]["l2"]
    assert l2["partition_function"]["value"] is None
    assert l2["slices"]["value"] is None and "not separated" in l2["slices"]["undetermined"]


@pytest.mark.gpu
def test_gpu_every_walk_runs_on_the_sm_it_asked_for(tmp_path, nvcc):
    from gpudissect.backends.cuda import CudaBackend
    from gpudissect.devices import detect_arch
    from gpudissect.kernels import compile_kernel

    arch = detect_arch(0)
    for kernel in e.KERNELS:
        compile_kernel(
            REPO / f"kernels/{kernel}.cu", arch=arch, output=tmp_path / f"{kernel}.cubin"
        )
    params = e.L2SliceParams(
        enabled=True, lines=512, region_bytes=2 << 20, repetitions=2, sms=(0, 1, 2, 3, 64, 65),
        flush_bytes=None, line_seed=0, contention_lines=512, contention_iterations=16,
    )  # fmt: skip
    offsets = e.line_offsets(lines=params.lines, region_bytes=2 << 20, seed=params.line_seed)
    chain = e.L2SliceWork(
        region_bytes=2 << 20, offsets_bytes=offsets, helper_sm=0, target_sm=0, passes=1,
        flush_bytes=8,
    )  # fmt: skip
    with CudaBackend(index=0, cubin_dir=tmp_path) as backend:
        from gpudissect.backends.l2slices_cuda import _layout

        data = e.run(backend, params, device=None)
        # the region as the walks left it, after the contention launches (atomics adding 0)
        at, _ = _layout(backend, chain)
        region = np.empty(chain.region_bytes // 4, np.uint32)
        backend.drv.memcpy_dtoh(region, at)
    assert (region == chain.region()).all()
    doc = analyse(data, provenance={"device": "gpu0"})
    print({k: (q.get("value"), q.get("evidence") or q.get("undetermined"))
           for k, q in doc["elements"]["l2"].items()})  # fmt: skip
    print([(r["sm"], r.get("near_cycles"), r.get("far_cycles"), r.get("mask")) for r in doc["sms"]])
    walks = data[data["phase"] < e.CONTENTION_PHASE]
    assert (walks["sm"] == walks["target_sm"]).all()
    assert set(walks["target_sm"]) == set(params.sms)
    assert walks["cycles"].between(100, 3000).mean() > 0.99
    con = data[data["phase"] == e.CONTENTION_PHASE]
    assert set(con["offset_bytes"]) == set(offsets.tolist())  # every line was placed
    slices = doc["elements"]["l2"]["slices"]
    assert slices["value"] is not None and slices["value"] >= 2, slices


def test_only_gaps_near_the_widest_are_partitions():
    from gpudissect.analysis.l2.l2_slices import partition_splits

    # an H100 SM of the helper's partition splits its slices 280 / 307 cycles, one of the
    # other partition 294 / 471: only gaps of at least half the widest are near and far
    got = partition_splits({0: None, 1: 27.0, 2: 177.0, 3: 150.0, 4: 60.0})
    assert got == {0: False, 1: False, 2: True, 3: True, 4: False}
    assert partition_splits({0: None}) == {0: False}


@pytest.mark.parametrize("missing", [False, True])
def test_additive_fits_are_the_least_squares_fits(missing):
    from gpudissect.analysis.l2.l2_slices import additive_fits

    rng = np.random.default_rng(3)
    s, k = 6, 9
    far = rng.random((s, k)) < 0.4
    y = rng.normal(size=(s, 1)) + rng.normal(size=(1, k)) + 5 * far
    y = y + rng.normal(scale=0.4, size=(s, k))
    if missing:
        y[1, 2] = y[4, 7] = np.nan
    # the general least-squares solution of a_sm + b_slice + p * far over the measured cells
    x = np.hstack([np.repeat(np.eye(s), k, axis=0), np.tile(np.eye(k), (s, 1)), far.reshape(-1, 1)])
    seen = ~np.isnan(y.reshape(-1))
    coef, *_ = np.linalg.lstsq(x[seen], y.reshape(-1)[seen], rcond=None)
    res = y.reshape(-1)[seen] - x[seen] @ coef
    got = additive_fits(y, far)["additive_far"]
    assert got["far_cycles"] == pytest.approx(coef[-1], abs=0.01)
    assert got["residual_sd_cycles"] == pytest.approx(res.std(), abs=0.002)


@pytest.fixture(scope="module")
def flat_twin(tmp_path_factory):
    """The twin with every slice at the same distance: the latencies tell only near from far,
    so only contention can sort the lines into the 16 slices."""
    doc = yaml.safe_load(TWIN.read_text())
    del doc["l2_slices"]["slice_cycles"]
    doc["l2_slices"]["atomic_cycles"] = 6
    path = tmp_path_factory.mktemp("flat") / "flat_slices_twin.yaml"
    path.write_text(yaml.safe_dump(doc))
    params = dataclasses.replace(PARAMS, contention_lines=256)
    with SimBackend(profile_path=path, seed=5) as backend:
        data = e.run(backend, params, device=None)
    return doc["l2_slices"], data


def test_contention_sorts_the_lines_into_the_profile_s_slices(flat_twin):
    spec, data = flat_twin
    walks_only = analyse(data[data["phase"] < e.CONTENTION_PHASE], provenance={"device": "t"})
    assert walks_only["elements"]["l2"]["slices"]["value"] != 16  # near and far classes only
    doc = analyse(data, provenance={"device": "t"})
    slices = doc["elements"]["l2"]["slices"]
    assert slices["value"] == 16 and slices["confidence"] > 0.9, slices
    cols = doc["columns"]
    assert cols["kind"] == "slice" and len(cols["offsets_bytes"]) == 256
    true_slice = [
        sum(_parity(o & m) << k for k, m in enumerate(spec["index"]["masks"]))
        for o in cols["offsets_bytes"]
    ]
    pairs = set(zip(cols["column"], true_slice, strict=True))
    assert len(pairs) == 16 and len({c for c, _ in pairs}) == 16  # one slice per class
    # one search per slice, each over the lines no earlier class took
    con = data[(data["phase"] == e.CONTENTION_PHASE) & (data["pass"] == 0)]
    assert con["reference_offset_bytes"].nunique() == 16
    assert "checks: 32 of 32 launches as the classes predict" in slices["evidence"]
    # every slice lies in one partition (parity of slice bits 0 and 2): 8 slices each
    assert doc["contention"]["classes_in_one_partition"] == 16
    assert doc["contention"]["classes_per_partition"] == [8, 8]
    assert len(con) < 256 * 16  # far fewer launches than every line against every class
    assert doc["model"]["fits"]["additive_far"]["r2"] > 0.99
    assert abs(doc["elements"]["l2"]["far_penalty_cycles"]["value"] - 200) < 1


def _contention(share_of, lines=64, noise=0.01, seed=0):
    """Contention rows of a class search over `lines` lines, each launch taking
    share_of(reference, partner) of the one-line time (1000 ns), with relative noise."""
    from gpudissect.analysis.l2.l2_shares import contention_same

    rng = np.random.default_rng(seed)
    left, frames = [int(o) * 128 for o in range(lines)], []
    while left:
        ref, rest = left[0], left[1:]
        partners = e.contention_partners(ref, rest)
        ns = [1000 * (1.0 if p == ref else share_of(ref, p)) for p in partners]
        frame = e._contention_frame(
            e.L2ContentionWork(region_bytes=1 << 20, flush_bytes=8, reference_bytes=ref,
                               partners_bytes=partners, iterations=1),
            len(frames),
            e.L2ContentionResult(np.asarray(ns) * (1 + rng.normal(0, noise, len(ns))), 1000.0),
        )  # fmt: skip
        frames.append(frame)
        same = contention_same(frame)
        left = [o for o in rest if not same[o]]
    return pd.concat(frames, ignore_index=True)


@pytest.mark.parametrize(
    ("share_of", "why"),
    [
        (lambda a, b: 0.5, "no two lines contend"),
        (lambda a, b: 1.0, "every line contends with every other"),
        # 48 slices for 64 lines: most classes hold one line
        (lambda a, b: 1.0 if (a // 128) % 48 == (b // 128) % 48 else 0.5, "classes hold one line"),
        # a line in eight launched only when disturbed (longer than one line alone)
        (
            lambda a, b: 1.8 if (b // 128) % 8 == 3 else 1.0 if a % 1024 == b % 1024 else 0.5,
            "placed on disturbed launches only",
        ),
    ],
)
def test_contention_that_cannot_give_the_slice_count_leaves_it_undetermined(share_of, why):
    from gpudissect.analysis.l2.l2_slices import _contention_slices, contention_classes

    q = _contention_slices(contention_classes(_contention(share_of)))
    assert q["value"] is None and why in q["undetermined"], q


def test_contention_classes_count_launches_near_the_threshold_as_undecided():
    from gpudissect.analysis.l2.l2_slices import _contention_slices, contention_classes

    clean = _contention(lambda a, b: 1.0 if a % 1024 == b % 1024 else 0.5)
    q = _contention_slices(contention_classes(clean))
    assert q["value"] == 8 and q["confidence"] > 0.99, q
    # the other slices take 0.73 of the one-line time: most inside three noise SDs of 0.75
    blurred = _contention(lambda a, b: 1.0 if a % 1024 == b % 1024 else 0.73)
    q = _contention_slices(contention_classes(blurred))
    assert q["confidence"] < 0.5, q


@handles("fake_l2", e.L2ContentionWork)
def _fake_contention(backend, work, *, seed=0):
    """Lines contend in groups of four (line index // 4), except the group's second and third
    lines, which do not contend with each other: classes that are not slices."""
    i, ref = work.partners_bytes // 128, work.reference_bytes // 128
    pair = np.isin(i % 4, (1, 2)) & np.isin(ref % 4, (1, 2)) & (i != ref)
    one = (i // 4 == ref // 4) & ~pair
    return e.L2ContentionResult(np.where(one, 1000.0, 500.0), 1000.0)


def _contention_rows(backend) -> pd.DataFrame:
    """The contention phase over 64 lines of 128 B (lines 0-63) on `backend`: its rows."""
    params = dataclasses.replace(PARAMS, lines=64, contention_lines=64)
    parts = e.contention_phase(backend, params, np.arange(64, dtype=np.int64) * 128, flush=8)
    data = e._frame_of(parts)  # the launches' columns, one frame
    return data[data["phase"] == e.CONTENTION_PHASE]


def test_classes_the_check_launches_contradict_are_not_slices():
    from gpudissect.analysis.l2.l2_slices import _contention_slices, contention_classes

    c = contention_classes(_contention_rows(_FakeBackend()))
    assert c["classes"] == 16 and c["checks"] == 32 and c["checks_agree"] == 16
    q = _contention_slices(c)
    assert q["value"] is None and "16 of 32 check launches disagree" in q["undetermined"], q


class _GlitchBackend(_FakeBackend):
    """Lines contend in groups of four; the first launch of line 5 beside line 0 (another
    group) runs at 0.77 of the one-line time, and the first of lines 9-12 beside it at 1.8
    (a burst of disturbed launches: longer than one line alone, which two lines cannot be)."""

    kind = "glitch_l2"

    def __init__(self):
        self.launches = []


def _groups_of_four(backend, work, first_launch_ns):
    """Lines contend in groups of four (one line alone: 1000 ns, two groups: 500); the first
    launch of each (reference, line) pair in `first_launch_ns` takes that long instead. Every
    launch is recorded in `backend.launches`."""
    i, ref = work.partners_bytes // 128, work.reference_bytes // 128
    ns = np.where(i // 4 == ref // 4, 1000.0, 500.0)
    for k, line in enumerate(i):
        pair = (int(ref), int(line))
        backend.launches.append(pair)
        if pair in first_launch_ns and backend.launches.count(pair) == 1:
            ns[k] = first_launch_ns[pair]
    return e.L2ContentionResult(ns, 1000.0)


@handles("glitch_l2", e.L2ContentionWork)
def _glitch_contention(backend, work, *, seed=0):
    glitches = {(0, 5): 770.0} | {(0, line): 1800.0 for line in range(9, 13)}
    return _groups_of_four(backend, work, glitches)


def test_ambiguous_and_disturbed_partners_are_launched_again_and_their_median_decides():
    from gpudissect.analysis.l2.l2_slices import _contention_slices, contention_classes

    backend = _GlitchBackend()
    rows = _contention_rows(backend)
    assert backend.launches.count((0, 5)) == 2  # 0.77, then 0.5: median 0.635, decided
    # 1.8, then 1.0 (8-11) or 0.5 (12): the undisturbed launch decides; line 12, the reference
    # of the fourth class, meets line 0 once more in the merge pass
    assert [backend.launches.count((0, line)) for line in range(9, 13)] == [2, 2, 2, 3]
    c = contention_classes(rows)
    assert c["classes"] == 16 and sorted(c["sizes"].tolist()) == [4] * 16
    assert _contention_slices(c)["value"] == 16


def test_the_contention_phase_reports_the_lines_placed():
    seen = []
    params = dataclasses.replace(PARAMS, lines=64, contention_lines=4096)  # capped at the lines
    e.contention_phase(
        _GlitchBackend(), params, np.arange(64, dtype=np.int64) * 128, flush=8,
        progress=lambda done, total: seen.append((done, total)),
    )  # fmt: skip
    assert seen[-1] == (64, 64) and len(seen) == 16  # a report per class (16 of 4 lines)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)


class _SlowPairBackend(_GlitchBackend):
    """Lines contend in groups of four; the first launch of line 6 (group 1) beside line 0
    runs at 0.9 of the one-line time: as slow as one slice, which two slices are not (an H100
    run put 6 of 1024 lines in another slice's class on such launches, 0.84-0.94)."""

    kind = "slow_pair_l2"


@handles("slow_pair_l2", e.L2ContentionWork)
def _slow_pair_contention(backend, work, *, seed=0):
    return _groups_of_four(backend, work, {(0, 6): 900.0})


def test_a_line_that_joins_on_one_slow_launch_leaves_on_its_second():
    from gpudissect.analysis.l2.l2_slices import _contention_slices, contention_classes

    backend = _SlowPairBackend()
    rows = _contention_rows(backend)
    # 0.9 joins, 0.5 beside it gives a median of 0.7 (ambiguous), a third launch 0.5 decides
    assert backend.launches.count((0, 6)) == 3
    # the lines of the reference's own slice are launched twice, the others of the first
    # search once (line 6 aside)
    assert [backend.launches.count((0, line)) for line in (1, 2, 3, 5, 7)] == [2, 2, 2, 1, 1]
    c = contention_classes(rows)
    labels = dict(zip(c["offsets"], c["labels"], strict=True))
    assert labels[6 * 128] == labels[4 * 128] != labels[0]
    assert c["classes"] == 16 and sorted(c["sizes"].tolist()) == [4] * 16
    assert _contention_slices(c)["value"] == 16


class _SplitBackend(_GlitchBackend):
    """Lines contend in groups of four; the first launch of line 3 beside line 0 (one group)
    reads 0.5 of the one-line time, as two slices do: line 3 leaves its slice's class."""

    kind = "split_l2"


@handles("split_l2", e.L2ContentionWork)
def _split_contention(backend, work, *, seed=0):
    return _groups_of_four(backend, work, {(0, 3): 500.0})


def test_a_slice_the_search_split_is_merged_by_the_references_pass():
    from gpudissect.analysis.l2.l2_slices import _contention_slices, contention_classes

    backend = _SplitBackend()
    phase = _contention_rows(backend)
    # the searches alone: line 3 left class 0 and formed a class of its own
    alone = contention_classes(phase[phase["pass"] != e.MERGE])
    assert alone["classes"] == 17 and sorted(alone["sizes"].tolist()) == [1, 3] + [4] * 15
    # the merge pass launched reference 0 beside reference 3 (twice: it joined) and merged them
    assert backend.launches.count((0, 3)) == 3
    c = contention_classes(phase)
    assert c["classes"] == 16 and sorted(c["sizes"].tolist()) == [4] * 16 and c["merged"] == 1
    # the check of class 0 ran on the merged class: lines 1 and 2 contend, 1 and 4 do not
    assert c["checks"] == 32 and c["checks_agree"] == 32
    q = _contention_slices(c)
    assert q["value"] == 16 and "merge pass: 1 pairs of class references contend" in q["evidence"]


def test_cuda_contention_launches_are_timed_by_events_kept_between_works():
    # the host side of l2_slice_hammer against a stand-in driver (no GPU): launch i of the
    # sweep (the untimed first one of each work counted) takes 100 + i ns; two works of 3 and
    # 5 partners make 5 pairs of events in all, and each partner reads its own launch's time
    from types import SimpleNamespace

    from gpudissect.backends.l2slices_cuda import run_l2_contention

    clock = {"ns": 0.0, "launches": 0}
    made = []

    class Event:
        def __init__(self):
            made.append(self)

        def record(self):
            self.at = clock["ns"]

        def synchronize(self):
            pass

        def time_since(self, start):
            return (self.at - start.at) / 1e6  # ms

    def prepared_call(*_args):
        clock["ns"] += 100 + clock["launches"]
        clock["launches"] += 1

    drv = SimpleNamespace(
        Event=Event, device_attribute=SimpleNamespace(MULTIPROCESSOR_COUNT="count")
    )
    backend = SimpleNamespace(
        drv=drv,
        device=SimpleNamespace(get_attribute=lambda key: 132),
        _device_buffer=lambda n, exact: 1 << 30,
        function=lambda *a: SimpleNamespace(prepared_call=prepared_call),
        clocks=lambda: {"sm_clock_mhz": 1980},
    )
    got = []
    for partners in ([0, 128, 0], [0, 256, 384, 0, 512]):
        work = e.L2ContentionWork(
            region_bytes=1 << 20, flush_bytes=8, reference_bytes=0,
            partners_bytes=np.array(partners, np.int64), iterations=16,
        )  # fmt: skip
        got.append(run_l2_contention(backend, work).elapsed_ns)
    assert len(made) == 2 * 5
    assert np.allclose(got[0], [101, 102, 103]) and np.allclose(got[1], [105, 106, 107, 108, 109])
