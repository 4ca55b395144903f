"""The node analysis on synthetic traces of two simulated nodes whose answers are known from
their profiles (tests/data/node2_sim.yaml, node4_sim.yaml): every expected value below is
derived by hand from the profile's numbers, never from the analysis."""

from __future__ import annotations

import pytest

from gpudissect.analysis.node.node import analyse
from gpudissect.backends import open_backend
from gpudissect.config import parse
from gpudissect.experiments import node as node_experiment

# the chase footprints of each profile: inside its L1, inside its L2 (beyond the L1), beyond
# its L2 (node2: L1 16 KiB, L2 256 KiB; node4: L1 8 KiB, L2 128 KiB)
FOOTPRINTS = {
    "node2_sim": {"l1": 4096, "l2": 65536, "beyond": 1048576},
    "node4_sim": {"l1": 2048, "l2": 32768, "beyond": 524288},
}


def _run(profile: str, **extra):
    raw = {
        "devices": [{"name": "n", "backend": "sim", "profile": f"tests/data/{profile}.yaml"}],
        "node": True,
        "experiments": {
            "node": {
                "footprints_bytes": FOOTPRINTS[profile],
                "record_steps": 128,
                "stream": {"launch_bytes": 1 << 24},
                "tlb": {"start_bytes": 8 << 20, "stop_bytes": 512 << 20},
                **extra,
            }
        },
    }
    device = parse(raw).device("n")
    with open_backend(device) as backend:
        data = node_experiment.run(backend, device.params["node"], device=device)
    return data, analyse(data, provenance={"device": "n"})


@pytest.fixture(scope="module")
def node2():
    return _run("node2_sim")[1]["node"]


@pytest.fixture(scope="module")
def node4():
    return _run("node4_sim")[1]["node"]


def _pair(node, src, dst):
    return next(p for p in node["pairs"] if (p["src"], p["dst"]) == (src, dst))


def _value(q):
    return q["value"]


# node2: L1 hit 38, L2 hit 230, DRAM 520 cycles; 0 -> 1 over a 700-cycle link keeping peer
# lines in its L1; 1 -> 0 over a 900-cycle link keeping none.
#   0 -> 1, ca: hit = the local L1's 38; L2 footprint = the peer's L2 over the link,
#   700 + 230 = 930; miss = 700 + 520 = 1220. 1 -> 0: hit = 900 + 230 = 1130, miss 1420.
@pytest.mark.parametrize(
    ("src", "dst", "path", "hit", "l2", "miss"),
    [
        (0, 1, "ca", 38, 930, 1220),
        (0, 1, "nc", 38, 930, 1220),
        (0, 1, "cg", 930, 930, 1220),
        (1, 0, "ca", 1130, 1130, 1420),
        (1, 0, "cg", 1130, 1130, 1420),
    ],
)
def test_node2_peer_latencies(node2, src, dst, path, hit, l2, miss):
    lat = _pair(node2, src, dst)["latency"][path]
    assert _value(lat["hit_latency_cycles"]) == pytest.approx(hit, abs=3)
    assert _value(lat["l2_footprint_latency_cycles"]) == pytest.approx(l2, abs=3)
    assert _value(lat["miss_latency_cycles"]) == pytest.approx(miss, abs=3)


def test_node2_caching_of_peer_lines(node2):
    forward, backward = _pair(node2, 0, 1)["caching"], _pair(node2, 1, 0)["caching"]
    for path in ("ca", "nc"):
        assert _value(forward[path]["l1_keeps_peer_lines"]) is True
        assert _value(forward[path]["l2_keeps_peer_lines"]) is False
        assert _value(backward[path]["l1_keeps_peer_lines"]) is False
        assert _value(backward[path]["l2_keeps_peer_lines"]) is False
    # the cg path has no L1: the local chase inside the L1 footprint is an L2 hit too
    assert "not_applicable" in forward["cg"]["l1_keeps_peer_lines"]


def test_node2_capacity_for_peer_lines(node2):
    # GPU 0's 16 KiB L1 keeps GPU 1's lines: the walk of 128-byte strides fits up to 16 KiB
    # (128 lines, 4 ways x 32 sets, LRU) and misses every line beyond; its L2 keeps none
    ca = _pair(node2, 0, 1)["caching"]["ca"]
    assert _value(ca["l1_peer_capacity_bytes"]) == 16384
    assert "not_applicable" in ca["l2_peer_capacity_bytes"]
    back = _pair(node2, 1, 0)["caching"]["ca"]
    assert "not_applicable" in back["l1_peer_capacity_bytes"]
    assert "not_applicable" in back["l2_peer_capacity_bytes"]


def test_node2_bandwidths(node2):
    # SM packets carry 128 bytes and a 16-byte header: reads tend to bandwidth x 128 / 144;
    # copy packets carry 256 bytes: bandwidth x 256 / 272, after 5000 ns of set-up
    for (src, dst), gbps in (((0, 1), 200.0), ((1, 0), 150.0)):
        p = _pair(node2, src, dst)
        assert _value(p["bandwidth"]["read"]["peak_gbps"]) == pytest.approx(
            gbps * 128 / 144, rel=0.03
        )
        assert _value(p["copy"]["bandwidth_gbps"]) == pytest.approx(gbps * 256 / 272, rel=0.02)
        assert _value(p["copy"]["fixed_ns"]) == pytest.approx(5000, rel=0.2)
        # the SM-driven peak lies below the copy engine's (smaller packets)
        assert _value(p["bandwidth"]["read"]["peak_gbps"]) < _value(p["copy"]["bandwidth_gbps"])


def test_node2_saturation_grows_with_fewer_bytes_per_access(node2):
    # a 4-byte access keeps a quarter of the bytes of a 16-byte one in flight per SM
    sat = _value(_pair(node2, 1, 0)["bandwidth"]["read"]["sms_to_saturate"])
    assert sat["4"] >= sat["16"]


def test_node2_atomics(node2):
    # at the L2 (230) plus 60 cycles of atomic, plus the link's round trip for a peer
    assert _value(_pair(node2, 0, 1)["atomic_latency_cycles"]) == pytest.approx(990, abs=3)
    assert _value(_pair(node2, 1, 0)["atomic_latency_cycles"]) == pytest.approx(1190, abs=3)
    assert _value(node2["local"]["0"]["atomic_latency_cycles"]) == pytest.approx(290, abs=3)


def test_node2_gpus_are_named_with_their_identity(node2):
    assert node2["gpus"][1] == {
        "gpu": 1,
        "name": "gpu1",
        "device": {"gpu": 1, "name": "Node test GPU", "profile": "node2_sim"},
    }


def test_node2_links_as_recorded(node2):
    link = _pair(node2, 0, 1)["link"]
    assert link == {
        "kind": "nvlink",
        "nvlink_count": 4,
        "nvlink_version": 4,
        "common_ancestor": "NVML_TOPOLOGY_SYSTEM",
    }


# node4: L1 44, L2 260, DRAM 610 cycles. Per pair (profile): link latency, peer caches.
NODE4 = {
    (0, 1): (650, {"l1d", "l2"}),
    (1, 0): (660, {"l2"}),
    (2, 3): (800, {"l1d"}),
    (3, 2): (820, set()),
    (0, 2): (1500, {"l2"}),
    (1, 2): (1900, set()),
    (2, 0): (1900, set()),
    (3, 1): (1900, set()),
}


@pytest.mark.parametrize(("pair", "link"), sorted(NODE4.items()))
def test_node4_pairs(node4, pair, link):
    latency_cycles, kept = link
    p = _pair(node4, *pair)
    assert p["peer_access"] is True
    ca = p["latency"]["ca"]
    # beyond the L2 every load crosses the link to the peer's DRAM
    assert _value(ca["miss_latency_cycles"]) == pytest.approx(latency_cycles + 610, abs=4)
    # inside the L1: the nearest cache that keeps the line, else the peer's L2
    hit = 44 if "l1d" in kept else 260 if "l2" in kept else latency_cycles + 260
    assert _value(ca["hit_latency_cycles"]) == pytest.approx(hit, abs=4)
    caching = p["caching"]["ca"]
    assert _value(caching["l1_keeps_peer_lines"]) is ("l1d" in kept)
    assert _value(caching["l2_keeps_peer_lines"]) is ("l2" in kept)


@pytest.mark.parametrize(
    ("pair", "l1", "l2"),
    # the walk's 128-byte strides use every other set of the 64-byte-line caches: the 8 KiB
    # L1 (2 ways x 64 sets) holds 64 of them (8 KiB of footprint), the 128 KiB L2 (16 ways x
    # 128 sets) 1024 (128 KiB)
    [((0, 1), 8192, 131072), ((1, 0), None, 131072), ((2, 3), 8192, None)],
)
def test_node4_capacity_for_peer_lines(node4, pair, l1, l2):
    ca = _pair(node4, *pair)["caching"]["ca"]
    for key, expected in (("l1_peer_capacity_bytes", l1), ("l2_peer_capacity_bytes", l2)):
        if expected is None:
            assert "not_applicable" in ca[key], ca[key]
        else:
            assert _value(ca[key]) == expected, ca[key]


def test_node4_tlb_reach_on_peer_and_own_memory(node4):
    # 16 L1-TLB entries of 2 MiB pages: a cyclic walk of 32 MiB stays inside, one of 64 MiB
    # misses every page in the L1 TLB (LRU, one set of 16 ways); the same for a GPU's own memory
    # and a peer's, whatever caches the data
    for p in node4["pairs"]:
        if p["peer_access"]:
            assert _value(p["tlb_reach_bytes"]) == 32 << 20, (p["src"], p["dst"])
    assert _value(node4["local"]["2"]["tlb_reach_bytes"]) == 32 << 20


def test_node2_without_tlbs_has_no_reach_step(node2):
    # no TLB in the profile: the series is flat, and the reach undetermined with the range
    reach = _pair(node2, 0, 1)["tlb_reach_bytes"]
    assert reach["value"] is None and "no step" in reach["undetermined"]


def test_node4_pair_without_peer_access(node4):
    p = _pair(node4, 3, 0)
    assert p["peer_access"] is False
    assert "latency" not in p and "bandwidth" not in p
    assert len(node4["pairs"]) == 12  # every ordered pair of four GPUs


def test_node4_pcie_and_nvlink_bandwidths(node4):
    # NVLink 0 -> 1 at 300 GB/s raw, PCIe 1 -> 2 at 25: copies at x 256 / 272
    fast = _value(_pair(node4, 0, 1)["copy"]["bandwidth_gbps"])
    slow = _value(_pair(node4, 1, 2)["copy"]["bandwidth_gbps"])
    assert fast == pytest.approx(300 * 256 / 272, rel=0.02)
    assert slow == pytest.approx(25 * 256 / 272, rel=0.02)
    assert _pair(node4, 1, 2)["link"]["kind"] == "pcie"


def test_time_budget_skips_and_leaves_readings_undetermined():
    data, doc = _run("node2_sim", time_budget_s=1e-9)
    assert set(data["kind"]) == {"gpu", "link", "skipped"}
    p = _pair(doc["node"], 0, 1)
    assert p["skipped"] and all("time_budget_s" in s for s in p["skipped"])
    assert "undetermined" in p["latency"]["ca"]["hit_latency_cycles"]
    assert "undetermined" in p["copy"]["bandwidth_gbps"]


def test_a_chase_that_left_its_chain_is_left_out_and_named():
    # the GPU backend marks a chase whose loads returned other indices than the chain's (a
    # stale line): the analysis drops its rows instead of reading them as latencies
    data, _ = _run("node2_sim")
    rows = (data["kind"] == "chase") & (data["src_gpu"] == 0) & (data["dst_gpu"] == 1)
    rows &= (data["path"] == "ca") & (data["footprint"] == "l1")
    data.loc[rows, "detail"] = "the walk left the chain"
    pair = _pair(analyse(data, provenance={"device": "n"})["node"], 0, 1)
    assert "undetermined" in pair["latency"]["ca"]["hit_latency_cycles"]
    assert "undetermined" in pair["caching"]["ca"]["l1_keeps_peer_lines"]
    assert any("the walk left the chain" in s for s in pair["skipped"])
    assert _value(pair["latency"]["cg"]["hit_latency_cycles"]) == pytest.approx(930, abs=3)
