"""Report sections of the throughput families, with TPDS Tables VI and VII beside the measured
values. Numbers come from the result documents; paper values from config/papers."""

from __future__ import annotations

from typing import Any

from .sections_banks import _pct_diff, _v, paper_values


def _pct(fraction: float | None) -> str:
    return "—" if fraction is None else f"{100 * fraction:.1f}%"


def global_throughput_section(doc: dict[str, Any], figures: list[str]) -> list[str]:
    lines = ["### Global-memory copy throughput (TPDS Sec. 5.1, Table VI)", ""]
    dram = doc["elements"]["dram"]
    if "maximum" not in doc:
        return lines + [f"- {_v(dram['throughput_gbps'])}", ""]
    paper = paper_values(doc, "global_throughput") or {}
    best = doc["maximum"]
    measured = dram["throughput_gbps"]["value"]
    eff = dram["efficiency"]["value"]
    ceiling = dram.get("copy_ceiling_gbps", {}).get("value")
    frac = dram.get("fraction_of_copy_ceiling", {}).get("value")
    p_eff = paper.get("efficiency_pct")
    lines += [
        "| quantity | measured | TPDS Table VI |",
        "| --- | --- | --- |",
        f"| theoretical bandwidth (GB/s) | {dram['theoretical_gbps']['value']:g} | "
        f"{paper.get('theoretical_gbps', '—')} |",
        f"| maximum throughput (GB/s) | {measured:g} | {paper.get('max_throughput_gbps', '—')} |",
        f"| efficiency | {_pct(eff)} | {'—' if p_eff is None else f'{p_eff}%'} |",
        f"| device-to-device copy (GB/s) | {'—' if ceiling is None else f'{ceiling:g}'} | — |",
        f"| maximum / device copy | {_pct(frac)} | — |",
        "",
        f"- Maximum at {best['ctas']} CTAs ({best['ctas_per_sm']} per SM) x "
        f"{best['threads_per_cta']} threads, ILP {best['ilp']}, {best['element_bytes']}-byte "
        f"elements ({best['warps']} warps in the grid)"
        + (
            f"; efficiency {100 * eff - p_eff:+.1f} percentage points from the paper."
            if p_eff is not None
            else "."
        ),
    ]
    little = doc.get("little_law", {})
    if "latency_ns" in little:
        lines.append(
            f"- Little's law: the least-occupied point gives a latency of "
            f"{little['latency_ns']:g} ns, so the maximum needs {little['bytes_in_flight_needed']}"
            f" bytes in flight ({little['warps_needed_at_ilp1_4byte']:g} warps at ILP 1 with "
            "4-byte elements)."
        )
    elif little:
        lines.append(f"- Little's law: undetermined ({little['undetermined']}).")
    backend = (doc.get("device_info") or {}).get("backend")
    if backend == "sim":
        lines.append(
            "- On the simulator the device-to-device copy is not an independent measurement: it "
            "is the throughput model's rate for a fully occupied ILP-8 vectorised copy."
        )
    lines.append("")
    return lines


def shared_throughput_section(doc: dict[str, Any], figures: list[str]) -> list[str]:
    lines = ["### Shared-memory copy throughput per SM (TPDS Sec. 6.1, Table VII)", ""]
    shared = doc["elements"]["shared"]
    if "by_vector_bytes" not in doc:
        return lines + [f"- {_v(shared['throughput_bytes_per_cycle_per_sm'])}", ""]
    paper = paper_values(doc, "shared_throughput") or {}
    theory = doc["theoretical_bytes_per_cycle_per_sm"]
    p_eff = paper.get("efficiency_pct")
    lines += [
        f"Theoretical: {theory:g} bytes per cycle per SM (banks x bytes per bank per cycle); "
        f"TPDS Table VII: {paper.get('theoretical_gbps_per_sm', '—')} GB/s per SM.",
        "",
        "| vector | peak (B/cycle/SM) | peak (GB/s/SM) | efficiency | TPDS Table VII peak "
        "(GB/s) | TPDS efficiency | configuration (threads x CTAs, ILP: warps) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for vector, v in doc["by_vector_bytes"].items():
        cfg = v["config"]
        is_paper = vector == "4"  # the paper copies 4-byte ints
        lines.append(
            f"| {vector} B | {v['bytes_per_cycle_per_sm']:g} | {v['gbps_per_sm']:g} | "
            f"{_pct(v['efficiency'])} | "
            f"{paper.get('peak_gbps_per_sm', '—') if is_paper else '—'} | "
            f"{(f'{p_eff}%' if p_eff is not None else '—') if is_paper else '—'} | "
            f"{cfg['threads_per_cta']} x {cfg['ctas_per_sm']}, ILP {cfg['ilp']}: "
            f"{v['active_warps']} warps (90% of the peak from {v['fewest_warps_at_90pct']}) |"
        )
    four = doc["by_vector_bytes"].get("4")
    if four and p_eff is not None:
        lines.append("")
        diff = _pct_diff(four["gbps_per_sm"], paper.get("peak_gbps_per_sm"))
        lines.append(
            f"- 4-byte copy efficiency {100 * four['efficiency'] - p_eff:+.1f} percentage points "
            f"from TPDS Table VII; peak {diff} from its GB/s per SM."
        )
    banks = doc.get("bank_structure", {})
    lines.append("")
    if "bytes_per_cycle" in banks:
        effs = ", ".join(
            f"{k}-byte {_pct(e)}" for k, e in banks["efficiency_by_vector_bytes"].items()
        )
        lines.append(
            f"- Against the measured bank structure ({banks['banks']} banks x "
            f"{banks['bank_width_bytes']} B = {banks['bytes_per_cycle']} bytes per cycle): {effs}."
        )
        if banks["bytes_per_cycle"] != theory:
            lines.append(
                f"- Two ceilings, two questions: the efficiency column divides by {theory:g} "
                "bytes per cycle (banks x the bytes a bank delivers per SM cycle, the ceiling "
                "TPDS Table VII uses), the line above by "
                f"{banks['bytes_per_cycle']} (every bank serving its full width every cycle). "
                "The first compares with the paper; the second says how much of the banks' "
                "raw width the copy uses."
            )
        little = banks.get("little_law")
        if little:
            p = paper.get("warps_needed_at_ilp1")
            lines.append(
                f"- Little's law (TPDS Sec. 6.1): with the {little['latency_cycles']:g}-cycle "
                f"shared latency, {little['warps_needed_at_ilp1']:g} active warps are needed at "
                f"ILP 1" + (f" (TPDS: about {p})." if p else ".")
            )
    else:
        lines.append(f"- Bank structure: {banks.get('undetermined', 'not available')}.")
    lines.append("")
    return lines
