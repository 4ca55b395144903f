"""What the timing code of the experiments adds to the latencies it reads (the ``timing:``
block of a profile; config/README.md, "Device profiles").

A profile's latencies are what the per-access timed window reads (clock, load, store of the
index, clock): the load, the index arithmetic of a 32-bit index chase and the window's store and
second clock read. A chase timed as a whole pays the window once, so each of its loads reads
``window_overhead_cycles`` less; one over 64-bit pointers also has no index arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TimingSpec:
    """The ``timing:`` block; all zero (the default) means the timing code adds nothing."""

    window_overhead_cycles: int = 0
    index_arithmetic_cycles: int = 0
    empty_window_cycles: int | None = None  # None: window_overhead_cycles
    clock_read_cycles: int = 0

    @property
    def empty_window(self) -> int:
        if self.empty_window_cycles is None:
            return self.window_overhead_cycles
        return self.empty_window_cycles

    def amortized_cycles(self, *, element_bytes: int) -> int:
        """Cycles a load of a chase timed as a whole reads less than the timed window reads."""
        return self.window_overhead_cycles + (
            self.index_arithmetic_cycles if element_bytes == 8 else 0
        )
