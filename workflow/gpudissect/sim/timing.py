"""What the timing code of the experiments adds to the latencies it reads (the ``timing:``
block of a profile; config/README.md, "Device profiles").

A profile's latencies are what the per-access timed window reads (clock, load, store of the
index, clock): the load, the index arithmetic of a 32-bit index chase and the window's store and
second clock read. A chase timed as a whole pays the window once, so each of its loads reads
``window_overhead_cycles`` less; one over 64-bit pointers also has no index arithmetic. The
window's cost after the load may differ by load path (after a texture fetch the store of the
index and the clock read cost less than after a load): ``window_overhead_by_path_cycles``
holds a path's own value, the others take ``window_overhead_cycles``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..exceptions import ProfileError


@dataclass(frozen=True)
class TimingSpec:
    """The ``timing:`` block; all zero (the default) means the timing code adds nothing."""

    window_overhead_cycles: int = 0
    index_arithmetic_cycles: int = 0
    empty_window_cycles: int | None = None  # None: window_overhead_cycles
    clock_read_cycles: int = 0
    # a load path's own window overhead (path name -> cycles), kept as sorted pairs
    window_overhead_by_path_cycles: tuple[tuple[str, int], ...] = field(default=())

    def __post_init__(self) -> None:
        by_path = self.window_overhead_by_path_cycles
        if isinstance(by_path, Mapping):
            by_path = tuple(sorted(by_path.items()))
        for path, cycles in by_path:
            if not isinstance(cycles, int) or cycles < 0:
                raise ProfileError(
                    f"timing.window_overhead_by_path_cycles.{path} must be a cycle count >= 0, "
                    f"got {cycles!r}"
                )
        object.__setattr__(self, "window_overhead_by_path_cycles", tuple(by_path))

    def window_overhead(self, path: str | None = None) -> int:
        """What the timed window adds after a load on ``path``."""
        return dict(self.window_overhead_by_path_cycles).get(path, self.window_overhead_cycles)

    @property
    def empty_window(self) -> int:
        if self.empty_window_cycles is None:
            return self.window_overhead_cycles
        return self.empty_window_cycles

    def amortized_cycles(self, *, element_bytes: int, path: str | None = None) -> int:
        """Cycles a load of a chase timed as a whole reads less than the timed window reads."""
        return self.window_overhead(path) + (
            self.index_arithmetic_cycles if element_bytes == 8 else 0
        )
