"""Estimate, before a GPU run, the launches and time of the automatic sweep ranges on the H100.

Reads the committed H100 reference (`results/reference/h100`, hand-set ranges): per sweep its
launches, the loads of each launch (one warm-up pass plus the timed ones) and their median
latency, and the sweep's `elapsed_s`. A launch then costs its loads x latency / SM clock plus a
fixed overhead per launch, fitted per sweep so that the reference's launches add up to its time.

The automatic sweeps are planned by the same code the pipeline runs (`auto_ranges`,
`sizesearch`, the analysis's decide functions), fed by a latency model whose sizes and
latencies are the reference's measured ones: a cache of size C hits below C and misses on a
share 1 - C/n of an array n past it; the L2 footprints step from near to far partition to DRAM.
It is an estimate: `benchmarks/bench_gpu_pipeline.py` on the GPU gives the real figure.

    python benchmarks/estimate_auto_sweeps.py
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from gpudissect.analysis.common.misses import first_miss_bracket
from gpudissect.analysis.l2.l2 import step_brackets
from gpudissect.contract.facts import DeviceFacts
from gpudissect.experiments import auto_ranges as ar
from gpudissect.experiments.pchase_classic import ClassicParams, plan
from gpudissect.sizesearch import refine_steps, search_size
from gpudissect.traces import read_trace

REF = Path(__file__).resolve().parents[1] / "results" / "reference" / "h100"
H100 = DeviceFacts(  # the driver's attributes of the H100 80GB HBM3 of the reference run
    source="driver", name="NVIDIA H100 80GB HBM3", compute_capability="9.0", sm_count=132,
    max_threads_per_sm=2048, l2_bytes=50 << 20, shared_per_sm_bytes=228 << 10,
    shared_per_block_optin_bytes=227 << 10, total_memory_bytes=85520809984,
)  # fmt: skip
RNG = np.random.default_rng(0)


def reference(experiment: str) -> tuple[float, int, float, float]:
    """(elapsed_s, launches, seconds of loads, SM clock MHz) of a reference sweep (the seconds
    of loads only for P-chase sweeps)."""
    trace = read_trace(REF / "traces" / "gpu0" / f"{experiment}.parquet")
    d, prov = trace.data, trace.provenance
    if "latency_cycles" not in d.columns:
        return float(prov["elapsed_s"]), len(d), 0.0, 0.0
    mhz = float(prov["clocks_before"]["sm_clock_mhz"])
    per = d.groupby("point").agg(
        n=("latency_cycles", "size"),
        lat=("latency_cycles", "median"),
        size=("array_bytes", "first"),
    )
    stride = d.groupby("point")["stride_bytes"].first()
    loads = per["n"] + per["size"] // stride
    busy = float((loads * per["lat"]).sum() / (mhz * 1e6))
    return float(prov["elapsed_s"]), len(per), busy, mhz


def overhead_s(experiment: str) -> float:
    elapsed, launches, busy, _ = reference(experiment)
    return max(0.0, (elapsed - busy) / launches)


def model(size_bytes: int | None, hit: float, miss: float, steps: int):
    """Per-access latencies of one launch over n bytes of a cache of size_bytes."""

    def measure(n: int) -> np.ndarray:
        lat = hit + RNG.normal(0, 1, steps)
        if size_bytes is not None and n > size_bytes:
            lat[RNG.random(steps) < max(0.05, 1 - size_bytes / n)] = miss
        return lat

    return measure


def cost(sizes, *, stride: int, steps: int, lat: float, over: float, mhz: float) -> float:
    return sum(over + (n // stride + steps) * lat / (mhz * 1e6) for n in sizes)


def l1_size() -> tuple[int, float]:
    doc = json.loads((REF / "analysis" / "gpu0" / "l1_size.json").read_text())
    over, (_, _, _, mhz) = overhead_s("l1_size"), reference("l1_size")
    launches, seconds = 0, 0.0
    for s in doc["series"]:
        c = s["l1d"]["size_bytes"]["value"]
        p = ar.size_plan(H100, path="ca", level=1, stride_bytes=128, resolution_bytes=128)
        out = search_size(model(c, 50, 310, 1024), first_miss_bracket, p)
        launches += len(out.sizes)
        seconds += cost(out.sizes, stride=128, steps=1024, lat=50, over=over, mhz=mhz)
    return launches, seconds


def stage1_size_phase() -> tuple[int, float, int, float]:
    """(reference size-phase launches and seconds, automatic ones) of cache_stage1."""
    trace = read_trace(REF / "traces" / "gpu0" / "cache_stage1.parquet")
    d = trace.data
    over, (_, _, _, mhz) = overhead_s("cache_stage1"), reference("cache_stage1")
    size = d[d.phase == "size"].groupby("point").agg(
        n=("latency_cycles", "size"), lat=("latency_cycles", "median"),
        a=("array_bytes", "first"), s=("stride_bytes", "first"),
    )  # fmt: skip
    ref_s = float((over + (size.a // size.s + size.n) * size.lat / (mhz * 1e6)).sum())
    doc = json.loads((REF / "analysis" / "gpu0" / "cache_stage1.json").read_text())
    launches, seconds = 0, 0.0
    lat = {"ca": (50, 310), "nc": (50, 306), "tex": (93, 340), "cg": (306, 580), "const": (41, 111)}
    for path, entry in doc["paths"].items():
        below = None
        for level, lv in enumerate(entry["levels"], start=1):
            c = lv["size_bytes"].get("value")
            res = 262144 if path == "cg" else (128 if path != "const" else 32)
            stride = 32 if level == 1 else 64
            p = ar.size_plan(H100, path=path, level=level, stride_bytes=stride,
                             resolution_bytes=res, below_bytes=below)  # fmt: skip
            hit, miss = lat[path] if level == 1 else (111, 306)
            out = search_size(model(c, hit, miss, 2048), first_miss_bracket, p)
            launches += len(out.sizes)
            seconds += cost(out.sizes, stride=stride, steps=2048, lat=hit, over=over, mhz=mhz)
            below = c
    return len(size), ref_s, launches, seconds


def l2() -> tuple[int, float]:
    over, (_, _, _, mhz) = overhead_s("l2"), reference("l2")
    near, size = 24 << 20, 50 << 20  # the reference's steps (l2.json)

    def measure(n: int) -> np.ndarray:
        level = 306 if n <= near else 538 if n <= size else 741
        return level + RNG.normal(0, 3, 2048)

    sizes: list[int] = []
    grid, res = ar.l2_grid(H100, stride_bytes=128)
    refine_steps(lambda n: sizes.append(n) or measure(n), step_brackets,
                 grid_bytes=grid, resolution_bytes=res, align_bytes=128)  # fmt: skip
    lat = {n: 306 if n <= near else 538 if n <= size else 741 for n in sizes}
    seconds = sum(over + (n // 128 + 2048) * lat[n] / (mhz * 1e6) for n in sizes)
    return len(sizes), seconds


def l2_flush() -> tuple[int, float]:
    """Copy time scales with the bytes copied from the host (source and flush)."""
    trace = read_trace(REF / "traces" / "gpu0" / "l2_flush.parquet")
    d = trace.data
    moved = float((d.size_bytes + d.flushed * d.flush_bytes).sum())
    rate = moved / float(trace.provenance["elapsed_s"])
    sizes, flush = ar.l2_flush_range(H100, align_bytes=256)
    reps = int(d.repetition.nunique())
    auto = reps * sum(2 * n + flush for n in sizes.sizes())
    return 2 * reps * len(sizes.sizes()), auto / rate


def pchase_classic() -> tuple[int, float]:
    doc = json.loads((REF / "analysis" / "gpu0" / "cache_stage1.json").read_text())
    c = doc["paths"]["tex"]["levels"][0]["size_bytes"]["value"]
    saavedra, wong = ar.classic_sizes(c, stride_bytes=32)
    params = ClassicParams(True, "tex", saavedra, 65536, 32, wong, 2048, 0)
    points = plan(params)
    over, (_, _, _, mhz) = overhead_s("pchase_classic"), reference("pchase_classic")
    seconds = sum(over + (n // s + 2048) * 93 / (mhz * 1e6) for _, n, s in points)
    return len(points), seconds


def main() -> None:
    rows = []
    for name, fn in (("l1_size", l1_size), ("l2", l2), ("l2_flush", l2_flush),
                     ("pchase_classic", pchase_classic)):  # fmt: skip
        elapsed, launches, _, _ = reference(name)
        rows.append((name, launches, elapsed, *fn()))
    ref_n, ref_s, auto_n, auto_s = stage1_size_phase()
    elapsed, launches, _, _ = reference("cache_stage1")
    rows.append(("cache_stage1", launches, elapsed, launches - ref_n + auto_n,
                 elapsed - ref_s + auto_s))  # fmt: skip
    print(f"{'sweep':16} {'hand-set launches':>18} {'s':>6} {'auto launches':>14} {'est. s':>7}")
    for name, n0, s0, n1, s1 in rows:
        print(f"{name:16} {n0:18d} {s0:6.1f} {n1:14d} {s1:7.1f}")
    saved = sum(r[2] - r[4] for r in rows)
    print(f"estimated saving: {saved:.1f} s of sweep time")


if __name__ == "__main__":
    main()
