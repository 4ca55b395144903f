"""Wall time of the bank-conflict, shared-throughput and global-throughput sweeps with their
default parameters on one device, and the numbers the H100 targets are about.

On a GPU host (compiles kernels/banks.cu and kernels/copy.cu for the GPU's arch first):

    python benchmarks/bench_bank_throughput_sweeps.py                 # CUDA device 0
    python benchmarks/bench_bank_throughput_sweeps.py --index 1

On the simulator (no GPU):

    python benchmarks/bench_bank_throughput_sweeps.py --profile config/devices/gtx780.yaml

Prints one line per sweep (seconds, points, rows) and, after the analyses, the selected bank
model, the shared copy's fraction of the theoretical bytes per cycle (H100 target >= 0.85) and
the global copy's fraction of the device-to-device copy (target >= 0.90). Target for one H100:
all three sweeps in under 120 s.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from gpudissect.config import parse
from gpudissect.families import family

REPO = Path(__file__).resolve().parents[1]
EXPERIMENTS = ("bank_conflicts", "shared_throughput", "global_throughput")


def _backend(args, build: Path):
    if args.profile:
        from gpudissect.backends.sim import SimBackend

        return SimBackend(profile_path=args.profile, seed=0)
    from gpudissect.backends.cuda import CudaBackend
    from gpudissect.devices import detect_arch
    from gpudissect.kernels import compile_kernel

    arch = detect_arch(args.index)
    for kernel in ("banks", "copy"):
        t = time.perf_counter()
        compile_kernel(
            REPO / "kernels" / f"{kernel}.cu", arch=arch, output=build / f"{kernel}.cubin"
        )
        print(f"compile {kernel}.cu for {arch}: {time.perf_counter() - t:.1f} s")
    return CudaBackend(index=args.index, cubin_dir=build)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--profile", help="run on the simulator with this device profile")
    p.add_argument("--index", type=int, default=0, help="CUDA device ordinal")
    p.add_argument("--out", help="write the three result documents (JSON) into this folder")
    args = p.parse_args()
    entry = (
        {"name": "bench", "backend": "sim", "profile": args.profile}
        if args.profile
        else {"name": "bench", "backend": "cuda", "index": args.index}
    )
    device = parse({"devices": [entry]}, base_dir=".").devices[0]
    docs, total = {}, 0.0
    with tempfile.TemporaryDirectory() as tmp, _backend(args, Path(tmp)) as backend:
        print(f"device: {backend.device_info().get('name')}")
        for name in EXPERIMENTS:
            fam = family(name)
            t = time.perf_counter()
            data = fam.run(backend, device.params[name], device=device, inputs={})
            seconds = time.perf_counter() - t
            total += seconds
            print(f"{name}: {seconds:.2f} s, {data['point'].nunique()} points, {len(data)} rows")
            docs[name] = (fam, data)
    prov = {"device": "bench"}
    banks = docs["bank_conflicts"][0].analyse(docs["bank_conflicts"][1], provenance=prov)
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(banks, f)
        f.flush()
        shared = docs["shared_throughput"][0].analyse(
            docs["shared_throughput"][1], provenance=prov, inputs={"bank_conflicts": f.name}
        )
    dram = docs["global_throughput"][0].analyse(docs["global_throughput"][1], provenance=prov)
    if args.out:
        from gpudissect.analysis.common.result import write_result

        for name, doc in zip(EXPERIMENTS, (banks, shared, dram), strict=True):
            write_result(Path(args.out) / f"{name}.json", doc)
    if "model" in banks:
        m = banks["model"]
        s = banks["elements"]["shared"]
        print(
            f"bank model: {m['selected']} R^2 {m['r2']:.4f}; no-conflict latency "
            f"{s['hit_latency_cycles'].get('value')} cycles, {m['slope_cycles']} per extra way"
        )
    if "by_vector_bytes" in shared:
        for v, d in shared["by_vector_bytes"].items():
            print(
                f"shared copy, {v}-byte vectors: {d['bytes_per_cycle_per_sm']} B/cycle/SM = "
                f"{d['efficiency']:.3f} of {shared['theoretical_bytes_per_cycle_per_sm']} "
                f"at {d['config']}"
            )
    q = dram["elements"]["dram"]
    if "maximum" in dram:
        print(
            f"global copy: {q['throughput_gbps']['value']} GB/s = "
            f"{q['efficiency']['value']:.3f} of theoretical {q['theoretical_gbps']['value']}; "
            f"{q.get('fraction_of_copy_ceiling', {}).get('value')} of the device copy "
            f"{q.get('copy_ceiling_gbps', {}).get('value')} GB/s at {dram['maximum']}"
        )
    print(f"total sweep time: {total:.1f} s (target < 120 s on one H100)")


if __name__ == "__main__":
    main()
