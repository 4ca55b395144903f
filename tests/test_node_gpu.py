"""GPU tests of the node family (`kernels/node.cu`, `kernels/pchase.cu`, `backends/node_cuda.py`)
on a host of two or more GPUs with peer access; they skip elsewhere. Run on the GPU host:
`pytest -m gpu tests/test_node_gpu.py`. Each test runs the node sweep over GPUs 0 and 1 (and,
where there are four, over 0-3 once) with small parameters, and checks what must hold on any
such pair - not values copied from a run."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.gpu


def _peer_gpus() -> int:
    """How many GPUs there are when GPUs 0 and 1 can access each other's memory (else 0)."""
    try:
        import pycuda.driver as drv

        drv.init()
        n = drv.Device.count()
        if n < 2:
            return 0
        a, b = drv.Device(0), drv.Device(1)
        return n if a.can_access_peer(b) and b.can_access_peer(a) else 0
    except Exception:
        return 0


needs_pair = pytest.mark.skipif(_peer_gpus() < 2, reason="needs two GPUs with peer access")


@pytest.fixture(scope="module")
def cubins(tmp_path_factory, nvcc):
    from gpudissect.devices import detect_arch
    from gpudissect.kernels import compile_kernel

    out = tmp_path_factory.mktemp("node_build")
    for k in ("pchase", "node"):
        compile_kernel(f"kernels/{k}.cu", arch=detect_arch(0), output=out / f"{k}.cubin")
    return out


def _sweep(cubins, gpus: int, **params):
    from gpudissect.analysis.node.node import analyse
    from gpudissect.backends import open_backend
    from gpudissect.config import parse
    from gpudissect.experiments import node as node_experiment

    raw = {
        "devices": [
            {"name": f"gpu{i}", "backend": "cuda", "index": i, "arch": "sm_90"} for i in range(gpus)
        ],
        "experiments": {
            "node": {
                "record_steps": 256,
                "stream": {"sms": [1, 4, 16, 64], "launch_bytes": 1 << 28},
                "copy": {"sizes_bytes": [1 << 22, 1 << 24, 1 << 26]},
                "time_budget_s": 240,
                **params,
            }
        },
    }
    device = parse(raw).device("gpu0")
    with open_backend(device, cubin_dir=cubins, exclusive=True) as backend:
        data = node_experiment.run(backend, device.params["node"], device=device)
    return data, analyse(data, provenance={"device": "gpu0"})["node"]


@pytest.fixture(scope="module")
def pair(cubins):
    return _sweep(cubins, 2)


def _q(q):
    assert "value" in q, q
    return q["value"]


@needs_pair
def test_every_pair_is_measured_and_nothing_skipped(pair):
    data, node = pair
    assert (data["kind"] == "skipped").sum() == 0, data.loc[data["kind"] == "skipped", "detail"]
    # every chase's loads returned its chain's indices (no walk through stale lines)
    chases = data[data["kind"] == "chase"]
    assert (chases["detail"] == "").all(), chases.loc[chases["detail"] != "", "detail"].unique()
    assert {(p["src"], p["dst"]) for p in node["pairs"]} == {(0, 1), (1, 0)}
    assert all(p["peer_access"] for p in node["pairs"])


@needs_pair
@pytest.mark.parametrize("path", ["ca", "cg", "nc"])
def test_peer_latency_is_above_local_and_misses_above_hits(pair, path):
    _, node = pair
    for p in node["pairs"]:
        peer = p["latency"][path]
        local = node["local"][str(p["src"])]["latency"][path]
        # beyond the L2 a peer load crosses the link: slower than the GPU's own DRAM
        assert _q(peer["miss_latency_cycles"]) > _q(local["miss_latency_cycles"])
        assert _q(peer["miss_latency_cycles"]) >= _q(peer["hit_latency_cycles"])
        # whether the L1 and L2 keep peer lines is decided (or not applicable), never open
        for key in ("l1_keeps_peer_lines", "l2_keeps_peer_lines"):
            assert "undetermined" not in p["caching"][path][key], p["caching"][path][key]


@needs_pair
def test_bandwidth_grows_with_sms_and_copy_is_measured(pair):
    data, node = pair
    from gpudissect.analysis.node.node import stream_points

    points = stream_points(data[data["kind"] == "stream"])
    reads = points[(points["direction"] == "read") & (points["access_bytes"] == 16)]
    for (_s, _d), g in reads.groupby(["src_gpu", "dst_gpu"]):
        g = g.sort_values("sms")
        assert g["gbps"].iloc[-1] > 2 * g["gbps"].iloc[0]  # 64 SMs move more than one
    for p in node["pairs"]:
        assert _q(p["copy"]["bandwidth_gbps"]) > 1.0
        assert _q(p["bandwidth"]["read"]["peak_gbps"]) > 1.0
        assert _q(p["atomic_latency_cycles"]) > 0


@needs_pair
def test_link_facts_are_recorded(pair):
    data, node = pair
    links = data[data["kind"] == "link"]
    assert len(links) == 2
    for p in node["pairs"]:
        assert p["link"]["kind"] in ("nvlink", "nvswitch", "pcie")
        if p["link"]["kind"] == "nvlink":
            assert p["link"]["nvlink_count"] >= 1


@needs_pair
def test_repeatable_across_two_runs(cubins, pair):
    _, first = pair
    _, second = _sweep(cubins, 2)
    for a, b in zip(first["pairs"], second["pairs"], strict=True):
        for path in ("ca", "cg", "nc"):
            for key in ("hit_latency_cycles", "miss_latency_cycles"):
                x, y = _q(a["latency"][path][key]), _q(b["latency"][path][key])
                assert abs(x - y) <= 0.1 * max(x, y), (a["src"], a["dst"], path, key, x, y)
            for key in ("l1_keeps_peer_lines", "l2_keeps_peer_lines"):
                assert a["caching"][path][key].get("value") == b["caching"][path][key].get("value")
        x = _q(a["copy"]["bandwidth_gbps"])
        y = _q(b["copy"]["bandwidth_gbps"])
        assert abs(x - y) <= 0.1 * max(x, y)


@needs_pair
def test_memory_bound_skips_what_does_not_fit(cubins):
    data, node = _sweep(cubins, 2, memory_fraction=1e-6, paths=["cg"])
    skipped = data.loc[data["kind"] == "skipped", "detail"]
    assert len(skipped) and all("memory_fraction" in d for d in skipped)
    assert all(p.get("skipped") for p in node["pairs"])


@pytest.mark.skipif(_peer_gpus() < 4, reason="needs four GPUs with peer access")
def test_four_gpus_every_ordered_pair(cubins):
    data, node = _sweep(cubins, 4, paths=["cg"], stream={"sms": [8], "access_bytes": [16]})
    assert len(node["pairs"]) == 12
    for p in node["pairs"]:
        if p["peer_access"]:
            miss = _q(p["latency"]["cg"]["miss_latency_cycles"])
            assert miss > _q(node["local"][str(p["src"])]["latency"]["cg"]["miss_latency_cycles"])
    assert np.isfinite(data.loc[data["kind"] == "chase", "latency_cycles"]).all()
