"""Shared-memory banks: the conflict degree of one warp access, from its byte addresses.

The model (Mei & Chu, TPDS 2017 section 6.2, Figs. 17-19; NPC 2014 section 3.1, Figs. 4-7):

- The SM has ``banks`` banks. In the mode of width ``W`` bytes (4 or 8 on Kepler), successive
  ``W``-byte words go to successive banks: word ``addr // W`` lives in bank
  ``(addr // W) mod banks``.
- Physically a bank is ``P`` bytes wide, ``P`` being the widest mode (4 on Fermi and Maxwell,
  8 on Kepler). One *bank row* is ``P`` bytes in every bank, so one row spans
  ``banks * P`` bytes of the address space: row ``addr // (banks * P)``. In the 4-byte mode of
  an 8-byte-bank Kepler, a row of bank ``b`` holds words ``b`` and ``b + 32`` of a 256-byte
  span, so two threads reading those two words do not conflict (NPC: "bank conflict is only
  caused by two or more threads accessing different bank rows"; stride 2 has no conflict in
  either Kepler mode, stride 6 has a 2-way conflict in 4-byte mode and none in 8-byte mode).
- A bank serves one row per pass; threads that read the same row of a bank are served together
  (the broadcast / multicast of Fermi, where a row is one word). The warp needs as many passes
  as the busiest bank has distinct rows: that is the conflict *degree*.
- Latency = ``base_latency_cycles + conflict_latency_cycles * (degree - 1)`` (Table VIII:
  latency grows almost linearly with the number of conflicting ways), or, where the profile
  gives ``conflict_latency_table_cycles`` (Kepler: the first conflict costs 35 cycles, later
  ways about 14), the table's latency for the degree: listed degrees exactly, degrees between
  two listed ones (or between 1, at ``base_latency_cycles``, and the first) interpolated
  linearly, degrees beyond the largest listed one ``conflict_latency_cycles`` per extra way.

An element wider than the mode's word (an 8-byte load in 4-byte mode) covers several words and
so several banks; its rows count like any other. For 8-byte elements with stride 1 in a 4-byte
mode that gives two passes, the two half-warp transactions Fermi makes for 64-bit accesses.

Nothing here uses the gcd formula of the papers: the degree is counted from the addresses, so
the gcd(stride, 32) law of Fermi and the Kepler exceptions both come out of the mapping.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpudissect.exceptions import ProfileError

WARP_THREADS = 32


@dataclass(frozen=True)
class SharedSpec:
    """The ``shared:`` block of a device profile (minus ``cite``).

    ``modes_bytes`` lists the selectable bank widths; empty means only ``bank_width_bytes``.
    The widest mode is the physical bank width (the width of one bank row).
    ``peak_bytes_per_cycle_per_sm`` defaults to ``banks * bank_width_bytes``.
    """

    size_bytes: int
    banks: int
    bank_width_bytes: int
    modes_bytes: tuple[int, ...] = ()
    base_latency_cycles: float = 0.0
    conflict_latency_cycles: float = 0.0
    peak_bytes_per_cycle_per_sm: float | None = None
    # (degree, latency) pairs, degrees >= 2 ascending; a mapping is accepted and sorted
    conflict_latency_table_cycles: tuple[tuple[int, float], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "conflict_latency_table_cycles", self._table())
        if not self.modes_bytes:
            object.__setattr__(self, "modes_bytes", (self.bank_width_bytes,))
        object.__setattr__(self, "modes_bytes", tuple(int(m) for m in self.modes_bytes))
        if self.size_bytes <= 0:
            raise ProfileError(f"shared.size_bytes must be positive, got {self.size_bytes}")
        if self.banks <= 0:
            raise ProfileError(f"shared.banks must be positive, got {self.banks} (Fermi on: 32)")
        for width in (self.bank_width_bytes, *self.modes_bytes):
            if width <= 0 or width & (width - 1):
                raise ProfileError(
                    f"shared bank widths must be positive powers of two (4 or 8), got {width}"
                )
        if self.bank_width_bytes not in self.modes_bytes:
            raise ProfileError(
                f"shared.bank_width_bytes {self.bank_width_bytes} (the default mode) must be one "
                f"of shared.modes_bytes {list(self.modes_bytes)}; add it to modes_bytes"
            )
        if self.base_latency_cycles < 0 or self.conflict_latency_cycles < 0:
            raise ProfileError(
                "shared.base_latency_cycles and shared.conflict_latency_cycles must be >= 0, got "
                f"{self.base_latency_cycles} and {self.conflict_latency_cycles}"
            )
        if self.peak_bytes_per_cycle_per_sm is not None and self.peak_bytes_per_cycle_per_sm <= 0:
            raise ProfileError(
                "shared.peak_bytes_per_cycle_per_sm must be positive, got "
                f"{self.peak_bytes_per_cycle_per_sm}; leave it out for banks * bank_width_bytes"
            )

    def _table(self) -> tuple[tuple[int, float], ...]:
        table = self.conflict_latency_table_cycles
        pairs = table.items() if isinstance(table, dict) else table
        out = []
        for degree, latency in pairs:
            if isinstance(degree, bool) or not str(degree).isdigit() or int(degree) < 2:
                raise ProfileError(
                    f"shared.conflict_latency_table_cycles: degree {degree!r} must be an "
                    "integer >= 2 (degree 1, no conflict, costs base_latency_cycles)"
                )
            if latency < 0:
                raise ProfileError(
                    f"shared.conflict_latency_table_cycles: latency {latency!r} of degree "
                    f"{degree} is negative; latencies must be >= 0 cycles"
                )
            out.append((int(degree), float(latency)))
        degrees = [d for d, _ in out]
        if len(set(degrees)) != len(degrees):
            raise ProfileError(
                f"shared.conflict_latency_table_cycles: degrees {sorted(degrees)} repeat; "
                "give each degree once"
            )
        return tuple(sorted(out))

    @property
    def physical_width_bytes(self) -> int:
        """Width of one bank row: the widest selectable mode."""
        return max(self.modes_bytes)

    @property
    def peak_bytes_per_cycle(self) -> float:
        """Theoretical shared bandwidth of one SM (Table VII: banks times bytes per bank)."""
        if self.peak_bytes_per_cycle_per_sm is not None:
            return float(self.peak_bytes_per_cycle_per_sm)
        return float(self.banks * self.bank_width_bytes)

    def mode_width(self, bank_width_bytes: int | None) -> int:
        """The mode to use: ``None`` selects the default; others must be a listed mode."""
        if bank_width_bytes is None:
            return self.bank_width_bytes
        if bank_width_bytes not in self.modes_bytes:
            raise ProfileError(
                f"bank width {bank_width_bytes} is not a mode of this device; its modes are "
                f"{list(self.modes_bytes)} (shared.modes_bytes)"
            )
        return bank_width_bytes


def conflict_degree(
    spec: SharedSpec,
    byte_addresses: np.ndarray,
    *,
    bank_width_bytes: int | None = None,
    element_bytes: int = 4,
) -> int:
    """Passes one warp access needs: max over banks of the distinct rows requested there.

    ``byte_addresses``: the start address of each active thread's element (up to 32 threads;
    leave inactive threads out). Each element covers ``element_bytes`` bytes.
    """
    addrs = np.asarray(byte_addresses, dtype=np.int64).ravel()
    if addrs.size == 0:
        return 0
    if addrs.size > WARP_THREADS:
        raise ValueError(
            f"one warp access has at most {WARP_THREADS} thread addresses, got {addrs.size}; "
            "split the access into warps"
        )
    if (addrs < 0).any():
        raise ValueError("shared-memory byte addresses must be non-negative")
    if element_bytes <= 0:
        raise ValueError(f"element_bytes must be positive, got {element_bytes}")
    width = spec.mode_width(bank_width_bytes)
    row_bytes = spec.banks * spec.physical_width_bytes
    # every mode-width word each element touches
    first = addrs // width
    count = (addrs + element_bytes - 1) // width - first + 1
    offsets = np.arange(int(count.max()))
    words = (first[:, None] + offsets)[offsets < count[:, None]]
    banks = words % spec.banks
    rows = (words * width) // row_bytes
    n_rows = int(rows.max()) + 1
    bank_of_pair = np.unique(banks * n_rows + rows) // n_rows  # one per distinct (bank, row)
    return int(np.bincount(bank_of_pair).max())


def access_latency_cycles(spec: SharedSpec, degree: int) -> int:
    """Latency of one warp access with the given conflict degree: Table VIII's linear law, or
    the profile's per-degree table (module docstring)."""
    passes = max(int(degree), 1)
    lo_degree, lo_latency = 1, float(spec.base_latency_cycles)
    for d, latency in spec.conflict_latency_table_cycles:
        if passes <= d:
            fraction = (passes - lo_degree) / (d - lo_degree)
            return int(round(lo_latency + fraction * (latency - lo_latency)))
        lo_degree, lo_latency = d, latency
    return int(round(lo_latency + spec.conflict_latency_cycles * (passes - lo_degree)))


def warp_access(
    spec: SharedSpec,
    byte_addresses: np.ndarray,
    *,
    bank_width_bytes: int | None = None,
    element_bytes: int = 4,
) -> tuple[int, int]:
    """``(latency_cycles, degree)`` of one warp reading ``element_bytes`` at each address."""
    degree = conflict_degree(
        spec, byte_addresses, bank_width_bytes=bank_width_bytes, element_bytes=element_bytes
    )
    return access_latency_cycles(spec, degree), degree


def strided_addresses(
    *,
    stride_elements: int,
    element_bytes: int = 4,
    threads: int = WARP_THREADS,
    base_bytes: int = 0,
) -> np.ndarray:
    """The papers' pattern: thread ``t`` reads element ``t * stride`` (stride 0 = broadcast)."""
    if stride_elements < 0:
        raise ValueError(f"stride_elements must be >= 0, got {stride_elements}")
    if not 1 <= threads <= WARP_THREADS:
        raise ValueError(f"threads must be in 1..{WARP_THREADS}, got {threads}")
    return base_bytes + np.arange(threads, dtype=np.int64) * stride_elements * element_bytes


def strided_warp_access(
    spec: SharedSpec,
    *,
    stride_elements: int,
    element_bytes: int = 4,
    bank_width_bytes: int | None = None,
    threads: int = WARP_THREADS,
) -> tuple[int, int]:
    """``(latency_cycles, degree)`` of TPDS Listing 4 / NPC Listing 1: one warp, index
    ``threadIdx.x * stride`` into an array of ``element_bytes`` elements."""
    addrs = strided_addresses(
        stride_elements=stride_elements, element_bytes=element_bytes, threads=threads
    )
    return warp_access(spec, addrs, bank_width_bytes=bank_width_bytes, element_bytes=element_bytes)
