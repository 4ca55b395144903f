"""Copy throughput of global and shared memory (TPDS Secs. 5.1 and 6.1, Tables VI and VII).

**Global** (`global_throughput` traces): a launch's throughput is the bytes it loads and stores
over its elapsed time; a point's value is the median over its repetitions. The maximum over the
sweep is compared with the theoretical bandwidth recorded in the trace (memory clock x bus width
x DDR factor: Table VI's "efficiency") and with the device-to-device copy timed in the same run
(the ceiling, median of its repetitions). Little's law (TPDS Sec. 5.1) from the data: at the point
with the fewest requests in flight the copy is latency-bound, so ``latency = bytes in flight /
throughput`` (each warp request carries ``32 x element`` bytes in and as many out); the requests
the maximum throughput needs are ``maximum x latency``.

**Shared** (`shared_throughput` traces): per SM and launch, the bytes its CTAs loaded and stored
over the span from the first CTA's start to the last one's end (SM clock cycles); a point's value
is the median over SMs and repetitions; active warps are the CTAs on the SM x CTA size / 32. The
peak (Table VII) is compared with the theoretical per-SM bandwidth recorded in the trace (banks x
bytes per bank per cycle, the datasheet's) and, when the bank-conflict result is given, with
banks x bank width measured by that analysis. Little's law as TPDS Sec. 6.1 applies it: warps
needed at ILP 1 = shared latency (from the bank-conflict result) x theoretical bytes per cycle /
(32 threads x 4 bytes).

Sees only the traces (and the bank-conflict result document).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..common.result import quantity, undetermined

WARP_THREADS = 32
SATURATION = 0.9  # "reaches the peak": the fewest active warps at 90 % of it


def _header(provenance: dict[str, Any], analysis: str) -> dict[str, Any]:
    return {
        "device": provenance["device"],
        "analysis": analysis,
        "trace": {k: provenance.get(k) for k in ("git_commit", "config_hash", "created_utc")},
        "device_info": provenance.get("device_info", {}),
        "clocks_before": provenance.get("clocks_before"),
        "clocks_after": provenance.get("clocks_after"),
    }


def _confidence(values: pd.Series) -> float:
    """1 / (1 + relative IQR) of a point's repetitions: spread lowers the confidence."""
    q75, q25 = np.percentile(values, [75, 25])
    med = float(np.median(values))
    return 1.0 / (1.0 + (q75 - q25) / med) if med > 0 else 0.0


# ---- global ---------------------------------------------------------------------------------
GLOBAL_KEYS = ["point", "ctas", "ctas_per_sm", "threads_per_cta", "ilp", "element_bytes"]


def global_points(data: pd.DataFrame) -> pd.DataFrame:
    """One row per kernel launch configuration: median throughput over repetitions."""
    k = data[data["kind"] == "kernel"].assign(gbps=lambda d: d["bytes_moved"] / d["elapsed_ns"])
    out = k.groupby(GLOBAL_KEYS, as_index=False).agg(
        gbps=("gbps", "median"),
        gbps_iqr=("gbps", lambda s: float(np.subtract(*np.percentile(s, [75, 25])))),
        sms=("sms", "first"),
    )
    warps = np.ceil(out["threads_per_cta"] / WARP_THREADS)
    out["warps"] = out["ctas"] * warps
    out["bytes_in_flight"] = out["warps"] * out["ilp"] * WARP_THREADS * out["element_bytes"]
    return out


def analyse_global(
    data: pd.DataFrame, *, provenance: dict[str, Any], inputs: dict | None = None
) -> dict[str, Any]:
    doc = _header(provenance, "global_throughput")
    points = global_points(data) if not data.empty else pd.DataFrame()
    if points.empty:
        doc["elements"] = {
            "dram": {"throughput_gbps": undetermined("the sweep ran no copy on this device")}
        }
        return doc
    data = data.assign(gbps=data["bytes_moved"] / data["elapsed_ns"])
    best = points.loc[points["gbps"].idxmax()]
    best_reps = data[data["point"] == best["point"]]["gbps"]
    theoretical = float(data["theoretical_gbps"].median())
    ceiling_rows = data[data["kind"] == "memcpy_dtod"]["gbps"]
    ceiling = float(ceiling_rows.median()) if len(ceiling_rows) else None
    config = (
        f"{int(best['ctas'])} CTAs ({int(best['ctas_per_sm'])} per SM) x "
        f"{int(best['threads_per_cta'])} threads, ILP {int(best['ilp'])}, "
        f"{int(best['element_bytes'])}-byte elements"
    )
    method = (
        "maximum over the copy sweep (CTAs x CTA size x ILP x element size) of the median "
        "throughput (bytes loaded + stored / elapsed) of each configuration, TPDS Sec. 5.1"
    )
    dram: dict[str, Any] = {
        "throughput_gbps": quantity(
            round(float(best["gbps"]), 3),
            unit="GB/s",
            confidence=_confidence(best_reps),
            method=method,
            evidence=f"{config}; {len(points)} configurations, {len(best_reps)} repetitions",
        ),
        "theoretical_gbps": quantity(
            round(theoretical, 3),
            unit="GB/s",
            confidence=1.0,
            method="memory clock x bus width x DDR factor, from the device (profile on the sim)",
            evidence="recorded in the trace",
        ),
        "efficiency": quantity(
            round(float(best["gbps"]) / theoretical, 4),
            unit="fraction",
            confidence=_confidence(best_reps),
            method="maximum throughput / theoretical bandwidth (TPDS Table VI)",
            evidence=f"{best['gbps']:.2f} / {theoretical:.2f} GB/s",
        ),
    }
    if ceiling is not None:
        dram["copy_ceiling_gbps"] = quantity(
            round(ceiling, 3),
            unit="GB/s",
            confidence=_confidence(ceiling_rows),
            method="device-to-device copy of the same buffers in the same run (median)",
            evidence=f"{len(ceiling_rows)} repetitions",
        )
        dram["fraction_of_copy_ceiling"] = quantity(
            round(float(best["gbps"]) / ceiling, 4),
            unit="fraction",
            confidence=min(_confidence(best_reps), _confidence(ceiling_rows)),
            method="maximum copy-kernel throughput / device-to-device copy throughput",
            evidence=f"{best['gbps']:.2f} / {ceiling:.2f} GB/s",
        )
    doc["elements"] = {"dram": dram}
    doc["maximum"] = {k: _plain(best[k]) for k in [*GLOBAL_KEYS, "gbps", "warps"]}
    doc["little_law"] = _global_little(points, float(best["gbps"]))
    doc["points"] = [
        {k: _plain(r[k]) for k in [*GLOBAL_KEYS, "gbps", "warps"]} for _, r in points.iterrows()
    ]
    return doc


def _global_little(points: pd.DataFrame, max_gbps: float) -> dict[str, Any]:
    low = points.loc[points["bytes_in_flight"].idxmin()]
    if low["gbps"] > 0.25 * max_gbps:
        return {
            "undetermined": (
                f"the lowest-concurrency point reaches {low['gbps'] / max_gbps:.0%} of the "
                "maximum: not latency-bound, so it does not measure the latency"
            )
        }
    # each warp request moves its bytes in and out: 2 x bytes in flight per latency
    latency_ns = 2 * float(low["bytes_in_flight"]) / float(low["gbps"])
    needed_bytes = max_gbps * latency_ns / 2
    return {
        "latency_ns": round(latency_ns, 1),
        "from_point": {k: _plain(low[k]) for k in GLOBAL_KEYS},
        "bytes_in_flight_needed": round(needed_bytes),
        "warps_needed_at_ilp1_4byte": round(needed_bytes / (WARP_THREADS * 4), 1),
        "method": "Little's law: latency = 2 x bytes in flight / throughput at the point with "
        "the fewest requests in flight; bytes in flight needed = maximum x latency / 2",
    }


# ---- shared ---------------------------------------------------------------------------------
SHARED_KEYS = ["point", "threads_per_cta", "ctas_per_sm", "ilp", "vector_bytes"]


def shared_sm_launches(data: pd.DataFrame) -> pd.DataFrame:
    """One row per (point, repetition, SM): bytes per cycle and active warps of that SM."""
    g = data.groupby([*SHARED_KEYS, "repetition", "smid"], as_index=False).agg(
        bytes=("bytes", "sum"),
        first_start=("start_cycle", "min"),
        last_start=("start_cycle", "max"),
        first_end=("end_cycle", "min"),
        last_end=("end_cycle", "max"),
        ctas=("cta", "size"),
        sm_clock_mhz=("sm_clock_mhz", "first"),
        peak=("peak_bytes_per_cycle_per_sm", "first"),
    )
    g["cycles"] = (g["last_end"] - g["first_start"]).clip(lower=1)
    g["bytes_per_cycle"] = g["bytes"] / g["cycles"]
    g["active_warps"] = g["ctas"] * np.ceil(g["threads_per_cta"] / WARP_THREADS)
    g["concurrent"] = g["last_start"] < g["first_end"]  # every CTA ran while the others did
    return g


def shared_points(data: pd.DataFrame) -> pd.DataFrame:
    sm = shared_sm_launches(data)
    out = sm.groupby(SHARED_KEYS, as_index=False).agg(
        bytes_per_cycle=("bytes_per_cycle", "median"),
        active_warps=("active_warps", "median"),
        concurrent_share=("concurrent", "mean"),
        sm_clock_mhz=("sm_clock_mhz", "median"),
        peak=("peak", "first"),
        samples=("bytes_per_cycle", "size"),
    )
    out["gbps_per_sm"] = out["bytes_per_cycle"] * out["sm_clock_mhz"] / 1000
    return out


def _read_banks(inputs: dict | None) -> dict[str, Any] | None:
    path = (inputs or {}).get("bank_conflicts")
    if not path or not Path(path).is_file():
        return None
    return json.loads(Path(path).read_text()).get("elements", {}).get("shared")


def analyse_shared(
    data: pd.DataFrame, *, provenance: dict[str, Any], inputs: dict | None = None
) -> dict[str, Any]:
    doc = _header(provenance, "shared_throughput")
    if data.empty:
        doc["elements"] = {
            "shared": {
                "throughput_bytes_per_cycle_per_sm": undetermined(
                    "the sweep ran no configuration: the device has no shared memory description"
                )
            }
        }
        return doc
    points = shared_points(data)
    sm = shared_sm_launches(data)
    peak_theory = float(points["peak"].median())
    by_vector = {}
    for vector, df in points.groupby("vector_bytes"):
        best = df.loc[df["bytes_per_cycle"].idxmax()]
        reps = sm[sm["point"] == best["point"]]["bytes_per_cycle"]
        reached = df[df["bytes_per_cycle"] >= SATURATION * best["bytes_per_cycle"]]
        by_vector[int(vector)] = {
            "bytes_per_cycle_per_sm": round(float(best["bytes_per_cycle"]), 3),
            "gbps_per_sm": round(float(best["gbps_per_sm"]), 3),
            "efficiency": round(float(best["bytes_per_cycle"]) / peak_theory, 4),
            "config": {k: _plain(best[k]) for k in SHARED_KEYS[1:]},
            "active_warps": _plain(best["active_warps"]),
            "fewest_warps_at_90pct": _plain(reached["active_warps"].min()),
            "confidence": round(_confidence(reps), 4),
            "concurrent_share": round(float(best["concurrent_share"]), 3),
        }
    top_vector = max(by_vector, key=lambda v: by_vector[v]["bytes_per_cycle_per_sm"])
    top = by_vector[top_vector]
    cfg = top["config"]
    evidence = (
        f"{cfg['threads_per_cta']} threads x {cfg['ctas_per_sm']} CTAs per SM "
        f"({top['active_warps']} warps), ILP {cfg['ilp']}, {top_vector}-byte vectors; "
        f"{len(points)} configurations; {top['concurrent_share']:.0%} of its SM launches had "
        "all CTAs resident together"
    )
    method = (
        "maximum over CTA size x CTAs per SM x ILP (x vector width) of the median per-SM copy "
        "throughput, 2 x bytes x threads x ILP / SM cycles (TPDS Sec. 6.1)"
    )
    shared: dict[str, Any] = {
        "throughput_bytes_per_cycle_per_sm": quantity(
            top["bytes_per_cycle_per_sm"],
            unit="bytes/cycle",
            confidence=top["confidence"],
            method=method,
            evidence=evidence,
        ),
        "throughput_gbps_per_sm": quantity(
            top["gbps_per_sm"],
            unit="GB/s",
            confidence=top["confidence"],
            method=method + ", at the SM clock recorded in the trace",
            evidence=evidence,
        ),
        "efficiency": quantity(
            top["efficiency"],
            unit="fraction",
            confidence=top["confidence"],
            method="peak / theoretical per-SM bandwidth (banks x bytes per bank per cycle, "
            "TPDS Table VII)",
            evidence=f"{top['bytes_per_cycle_per_sm']:.2f} / {peak_theory:g} bytes per cycle",
        ),
    }
    doc["elements"] = {"shared": shared}
    doc["theoretical_bytes_per_cycle_per_sm"] = peak_theory
    doc["by_vector_bytes"] = {str(k): v for k, v in sorted(by_vector.items())}
    doc["bank_structure"] = _bank_structure(_read_banks(inputs), by_vector, peak_theory)
    doc["points"] = [
        {k: _plain(r[k]) for k in [*SHARED_KEYS, "active_warps", "bytes_per_cycle", "gbps_per_sm"]}
        for _, r in points.iterrows()
    ]
    return doc


def _bank_structure(
    banks_doc: dict[str, Any] | None, by_vector: dict[int, dict], peak_theory: float
) -> dict[str, Any]:
    if not banks_doc:
        return {"undetermined": "no bank-conflict result was given to this analysis"}
    values = {k: (banks_doc.get(k) or {}).get("value") for k in ("banks", "bank_width_bytes")}
    latency = (banks_doc.get("hit_latency_cycles") or {}).get("value")
    if None in values.values():
        return {"undetermined": "the bank-conflict result left banks or bank width undetermined"}
    width = values["banks"] * values["bank_width_bytes"]
    out: dict[str, Any] = {
        "banks": values["banks"],
        "bank_width_bytes": values["bank_width_bytes"],
        "bytes_per_cycle": width,
        "efficiency_by_vector_bytes": {
            str(v): round(d["bytes_per_cycle_per_sm"] / width, 4) for v, d in by_vector.items()
        },
    }
    if latency is not None:
        out["little_law"] = {
            "latency_cycles": latency,
            "warps_needed_at_ilp1": round(latency * peak_theory / (WARP_THREADS * 4), 1),
            "method": "TPDS Sec. 6.1: active warps x ILP = latency x throughput, with the "
            "shared latency without conflict and the theoretical bytes per cycle, one 4-byte "
            "word per thread per request",
        }
    return out


def _plain(v: Any) -> Any:
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return round(v, 4) if isinstance(v, float) else v
