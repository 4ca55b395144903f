"""Throughput families: analysis on hand-built traces, launch feasibility, the twins against
TPDS Tables VI and VII, and GPU checks (`pytest -m gpu`)."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gpudissect.analysis.throughput.throughput import analyse_global, analyse_shared
from gpudissect.backends.sim import SimBackend
from gpudissect.experiments import global_throughput as gt
from gpudissect.experiments import shared_throughput as st

REPO = Path(__file__).resolve().parents[1]
PROV = {"device": "synthetic"}


def _global_rows(points, *, ceiling_gbps, theoretical=100.0, sms=1, copy=1 << 20):
    """Kernel rows at the given throughputs (GB/s = bytes per ns), 3 repetitions each, and the
    device-copy rows."""
    rows = []
    for i, (ctas, threads, ilp, element, gbps) in enumerate(points):
        for r in range(3):
            rows.append(("kernel", i, ctas, ctas // sms, threads, ilp, element, r, gbps))
    for r in range(3):
        rows.append(("memcpy_dtod", len(points), 0, 0, 0, 0, 0, r, ceiling_gbps))
    df = pd.DataFrame(
        rows,
        columns=[
            "kind",
            "point",
            "ctas",
            "ctas_per_sm",
            "threads_per_cta",
            "ilp",
            "element_bytes",
            "repetition",
            "gbps",
        ],
    )
    df["bytes_moved"] = 2 * copy
    df["elapsed_ns"] = df["bytes_moved"] / df.pop("gbps")
    return df.assign(
        sm_clock_mhz=1000.0, memory_clock_mhz=1000.0, theoretical_gbps=theoretical, sms=sms
    )


def test_global_maximum_efficiency_and_ceiling():
    # one warp, ILP 1, 4-byte elements: 128 bytes in flight at 1 GB/s -> latency
    # 2 x 128 / 1 = 256 ns; the maximum 80 GB/s then needs 80 x 256 / 2 = 10240 bytes in
    # flight = 80 warps at ILP 1 with 4-byte elements (128 bytes per warp request)
    data = _global_rows(
        [(1, 32, 1, 4, 1.0), (4, 256, 4, 4, 60.0), (8, 1024, 8, 16, 80.0)], ceiling_gbps=88.0
    )
    doc = analyse_global(data, provenance=PROV)
    dram = doc["elements"]["dram"]
    assert dram["throughput_gbps"]["value"] == pytest.approx(80.0)
    assert dram["efficiency"]["value"] == pytest.approx(0.8)
    assert dram["copy_ceiling_gbps"]["value"] == pytest.approx(88.0)
    assert dram["fraction_of_copy_ceiling"]["value"] == pytest.approx(80 / 88, abs=1e-4)
    assert doc["maximum"]["threads_per_cta"] == 1024 and doc["maximum"]["element_bytes"] == 16
    little = doc["little_law"]
    assert little["latency_ns"] == pytest.approx(256.0)
    assert little["warps_needed_at_ilp1_4byte"] == pytest.approx(80.0)


def test_global_without_a_latency_bound_point_leaves_littles_law_undetermined():
    data = _global_rows([(1, 32, 1, 4, 50.0), (8, 1024, 8, 16, 80.0)], ceiling_gbps=90.0)
    assert "undetermined" in analyse_global(data, provenance=PROV)["little_law"]


def _shared_rows():
    """Point 0: 2 SMs x 2 CTAs of 64 threads (4 warps per SM), ILP 2, 4-byte elements.
    SM 0: CTAs run [0, 1000] and [10, 1010] cycles; SM 1: [5, 2005] and [5, 2005].
    A CTA moves 2 x 2 x 4 x 64 x 100 iterations = 102400 bytes; SM 0 moves 204800 bytes in
    1010 cycles = 202.77 B/cycle, SM 1 in 2000 cycles = 102.4; median over the SMs 152.59.
    Point 1: one CTA of 32 threads on SM 0, 12800 bytes in 1000 cycles = 12.8 B/cycle."""
    rows = [
        (0, 64, 2, 2, 4, 0, 0, 0, 0, 1000, 102400),
        (0, 64, 2, 2, 4, 0, 1, 0, 10, 1010, 102400),
        (0, 64, 2, 2, 4, 0, 2, 1, 5, 2005, 102400),
        (0, 64, 2, 2, 4, 0, 3, 1, 5, 2005, 102400),
        (1, 32, 1, 1, 4, 0, 0, 0, 0, 1000, 12800),
    ]
    df = pd.DataFrame(
        rows,
        columns=[
            "point",
            "threads_per_cta",
            "ctas_per_sm",
            "ilp",
            "vector_bytes",
            "repetition",
            "cta",
            "smid",
            "start_cycle",
            "end_cycle",
            "bytes",
        ],
    )
    return df.assign(iterations=100, sm_clock_mhz=1000.0, peak_bytes_per_cycle_per_sm=256.0)


def test_shared_peak_per_sm_and_littles_law(tmp_path):
    banks = tmp_path / "bank_conflicts.json"
    banks.write_text(
        json.dumps(
            {
                "elements": {
                    "shared": {
                        "banks": {"value": 32},
                        "bank_width_bytes": {"value": 8},
                        "hit_latency_cycles": {"value": 47},
                    }
                }
            }
        )
    )
    doc = analyse_shared(_shared_rows(), provenance=PROV, inputs={"bank_conflicts": str(banks)})
    shared = doc["elements"]["shared"]
    expected = (204800 / 1010 + 204800 / 2000) / 2
    assert shared["throughput_bytes_per_cycle_per_sm"]["value"] == pytest.approx(expected, abs=1e-3)
    assert shared["efficiency"]["value"] == pytest.approx(expected / 256, abs=1e-4)
    assert shared["throughput_gbps_per_sm"]["value"] == pytest.approx(expected, abs=1e-3)
    best = doc["by_vector_bytes"]["4"]
    assert best["active_warps"] == 4 and best["config"]["ctas_per_sm"] == 2
    # TPDS Sec. 6.1: 47 cycles x 256 bytes per cycle / (32 threads x 4 bytes) = 94 warps
    assert doc["bank_structure"]["little_law"]["warps_needed_at_ilp1"] == pytest.approx(94)
    assert doc["bank_structure"]["bytes_per_cycle"] == 256


def test_shared_without_bank_result_says_so():
    doc = analyse_shared(_shared_rows(), provenance=PROV, inputs={})
    assert "undetermined" in doc["bank_structure"]


def test_empty_traces_are_undetermined():
    g = analyse_global(_global_rows([], ceiling_gbps=1.0).iloc[:0], provenance=PROV)
    assert "undetermined" in g["elements"]["dram"]["throughput_gbps"]
    s = analyse_shared(_shared_rows().iloc[:0], provenance=PROV)
    assert "undetermined" in s["elements"]["shared"]["throughput_bytes_per_cycle_per_sm"]


H100_FACTS = st.ThroughputFacts(
    sms=132,
    max_threads_per_sm=2048,
    max_ctas_per_sm=32,
    shared_bytes_per_sm=233472,
    shared_bytes_per_cta=232448,
    shared_reserved_bytes_per_cta=1024,
    shared_peak_bytes_per_cycle_per_sm=128.0,
    dram_theoretical_gbps=3352.0,
    l2_bytes=52428800,
)


def test_launches_that_cannot_be_resident_are_left_out():
    # 1024 threads x ILP 8 x 16 B x 2 regions = 256 KiB > 227 KiB per CTA
    assert not st.fits(st.SharedCopyWork(1024, 1, 8, 16), H100_FACTS)
    # 1024 x ILP 4 x 16 B x 2 = 128 KiB: one fits, two (2 x 129 KiB) do not
    assert st.fits(st.SharedCopyWork(1024, 1, 4, 16), H100_FACTS)
    assert not st.fits(st.SharedCopyWork(1024, 2, 4, 16), H100_FACTS)
    # 3 CTAs of 1024 threads exceed 2048 threads per SM
    assert not st.fits(st.SharedCopyWork(1024, 3, 1, 4), H100_FACTS)


# --- the twins: TPDS Table VI and VII efficiencies (percent) ---------------------------------
TABLE_VI = {"gtx560ti": 81.38, "gtx780": 74.87, "gtx980": 69.64}
TABLE_VII = {"gtx560ti": 57.4, "gtx780": 32.5, "gtx980": 83.9}


@pytest.mark.parametrize("name", list(TABLE_VI))
def test_twin_efficiencies_match_tables_vi_and_vii(name):
    backend = SimBackend(profile_path=REPO / "config/devices" / f"{name}.yaml", seed=2)
    gsweep = gt.GlobalThroughputSweep(
        True, (1, 2, 4, 8, 16, 32), (32, 64, 128, 256, 512, 1024), (1, 2, 4, 8), (4,), 1 << 28, 2
    )
    gdoc = analyse_global(gt.run(backend, gsweep, device=None), provenance={"device": name})
    assert 100 * gdoc["elements"]["dram"]["efficiency"]["value"] == pytest.approx(
        TABLE_VI[name], abs=5
    )
    ssweep = st.SharedThroughputSweep(
        True, (32, 64, 128, 256, 512, 1024), (1, 2, 3, 4, 5, 6), (1, 2, 4, 6, 8), (4,), 256, 2
    )
    sdoc = analyse_shared(st.run(backend, ssweep, device=None), provenance={"device": name})
    assert 100 * sdoc["by_vector_bytes"]["4"]["efficiency"] == pytest.approx(TABLE_VII[name], abs=5)


# --- on the GPU ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cuda_backend(tmp_path_factory, nvcc):
    from gpudissect.backends.cuda import CudaBackend
    from gpudissect.devices import detect_arch
    from gpudissect.kernels import compile_kernel

    out = tmp_path_factory.mktemp("build")
    compile_kernel(REPO / "kernels/copy.cu", arch=detect_arch(0), output=out / "copy.cubin")
    with CudaBackend(index=0, cubin_dir=out) as b:
        yield b


@pytest.mark.gpu
@pytest.mark.parametrize(("element_bytes", "ilp"), [(4, 1), (4, 6), (16, 8)])
def test_gpu_global_copy_copies_every_element(cuda_backend, element_bytes, ilp):
    drv = cuda_backend.drv
    n_words = 1_000_003 * (element_bytes // 4)  # not a multiple of threads x ILP: the tail runs
    src = np.arange(n_words, dtype=np.uint32)
    d_src, d_dst = drv.to_device(src), drv.mem_alloc(src.nbytes)
    fn = cuda_backend.function("copy", f"gcopy_e{element_bytes}_ilp{ilp}", "PPQ")
    fn.prepared_call((37, 1), (128, 1, 1), d_src, d_dst, np.uint64(src.nbytes // element_bytes))
    cuda_backend.context.synchronize()
    assert np.array_equal(drv.from_device(d_dst, src.shape, np.uint32), src)


@pytest.mark.gpu
def test_gpu_shared_copy_records_every_cta(cuda_backend):
    work = st.SharedCopyWork(256, 2, 4, 16, 64, 2)
    r = cuda_backend.run(work)
    facts = cuda_backend.run(st.ThroughputFactsQuery())
    assert len(r.cta) == 2 * 2 * facts.sms
    assert (r.end_cycle > r.start_cycle).all() and (r.smid < facts.sms).all()


@pytest.mark.gpu
def test_gpu_throughput_targets(cuda_backend):
    # H100 targets: a copy kernel within 10 % of the driver's device copy, and the shared copy
    # at >= 85 % of 128 bytes per cycle per SM
    gsweep = gt.GlobalThroughputSweep(
        True, (1, 2, 4, 8), (256, 512, 1024), (4, 8), (16,), 1 << 28, 3
    )
    gdoc = analyse_global(gt.run(cuda_backend, gsweep, device=None), provenance={"device": "gpu"})
    assert gdoc["elements"]["dram"]["fraction_of_copy_ceiling"]["value"] >= 0.90
    ssweep = st.SharedThroughputSweep(True, (256, 512, 1024), (1, 2, 4), (2, 4, 8), (4, 16), 512, 3)
    sdoc = analyse_shared(st.run(cuda_backend, ssweep, device=None), provenance={"device": "gpu"})
    assert sdoc["elements"]["shared"]["efficiency"]["value"] >= 0.85
