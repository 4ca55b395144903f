"""Sim handlers of mapped chases (`experiments.mapped_chase`): the layout becomes the page map
of the simulated GPU (`sim.tlb.PageMap`: virtual chunk v in physical chunk `chunk_order()[v]`,
the simulator's physical chunks numbered in allocation order from address 0)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..contract.backend import ChaseResult, handles
from ..experiments.mapped_chase import MappedChaseWork, PhysicalLayout, ReleaseMapping

if TYPE_CHECKING:
    from .sim import SimBackend


def page_map(layout: PhysicalLayout):
    from ..sim.tlb import PageMap

    return PageMap(chunk_bytes=layout.chunk_bytes, frames=layout.chunk_order())


@handles("sim", MappedChaseWork)
def run_mapped_chase(
    backend: SimBackend, work: MappedChaseWork, *, carveout_pct=None, seed: int = 0
) -> ChaseResult:
    # the map is built once per layout and kept, as a GPU keeps its mapping
    cached = getattr(backend, "_page_map", None)
    if cached is None or cached[0] != work.layout:
        backend._page_map = (work.layout, page_map(work.layout))
    return backend.run_chase(
        work.chase, carveout_pct=carveout_pct, seed=seed, page_map=backend._page_map[1]
    )


@handles("sim", ReleaseMapping)
def release_mapping(backend: SimBackend, work: ReleaseMapping, **kwargs) -> None:
    backend._page_map = None
