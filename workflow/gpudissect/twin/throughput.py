"""The twin's `throughput` block: the streaming servers of sim/bandwidth.py from the bandwidths
the `bandwidth` experiment measured, so that the twin's run of it reads them back.

DRAM: the theoretical bandwidth from the driver (memory clock x bus width x DDR factor 2, as
the GPU run recorded it) and the share of it the measured DRAM read reached; the L2: its
measured read and write bandwidths; the L1: its measured read bandwidth per SM and cycle. DRAM
writes: the share of the peak the measured DRAM write reached, where it was measured (the
simulator's DRAM serves a stream of stores at that rate, reads at theirs). Without a measured
DRAM read, or a driver memory clock and bus width, no block."""

from __future__ import annotations

from typing import Any

from .reading import TopologyReader

DDR_FACTOR = 2  # the driver's memory clock is the clock; data move on both edges


def throughput_block(b: TopologyReader, *, sms: int, sm_mhz: float) -> dict[str, Any] | None:
    clock, bus = b.driver.get("memory_clock_khz"), b.driver.get("memory_bus_width_bits")
    dram = b.value("dram", "read_bandwidth_gbps")
    if not (clock and bus and dram):
        return None
    peak = DDR_FACTOR * clock * 1e3 * bus / 8 / 1e9
    out: dict[str, Any] = {"dram_peak_gbps": round(peak, 3)}
    cite = {
        "dram_peak_gbps": f"driver: memory_clock_khz = {clock} x memory_bus_width_bits = {bus} "
        f"/ 8 x DDR factor {DDR_FACTOR}"
    }
    out["dram_achievable_fraction"] = round(min(dram / peak, 1.0), 4)
    cite["dram_achievable_fraction"] = (
        f"derived: {b.cite('dram', 'read_bandwidth_gbps')} / dram_peak_gbps"
    )
    write = b.value("dram", "write_bandwidth_gbps")
    if write:
        out["dram_write_achievable_fraction"] = round(min(write / peak, 1.0), 4)
        cite["dram_write_achievable_fraction"] = (
            f"derived: {b.cite('dram', 'write_bandwidth_gbps')} / dram_peak_gbps"
        )
    for key, direction in (("l2_read_peak_gbps", "read"), ("l2_write_peak_gbps", "write")):
        value = b.value("l2", f"{direction}_bandwidth_gbps")
        if value:
            out[key] = round(float(value), 3)
            cite[key] = b.cite("l2", f"{direction}_bandwidth_gbps")
    near = b.value("l2", "near_read_bandwidth_gbps")
    if near:  # the l2_near footprint: each SM's reads served by its own partition
        out["l2_near_read_peak_gbps"] = round(float(near), 3)
        cite["l2_near_read_peak_gbps"] = b.cite("l2", "near_read_bandwidth_gbps")
    l1 = b.value("l1d", "read_bandwidth_gbps")
    if l1:
        out["l1_peak_bytes_per_cycle_per_sm"] = round(l1 * 1000.0 / (sms * sm_mhz), 3)
        cite["l1_peak_bytes_per_cycle_per_sm"] = (
            f"derived: {b.cite('l1d', 'read_bandwidth_gbps')} / ({sms} SMs x {sm_mhz} MHz)"
        )
    out["cite"] = cite
    return out
