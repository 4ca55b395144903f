"""The `sim` backend: runs experiment work through the mechanistic simulator."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

import numpy as np

from ..contract.backend import Backend, ChaseResult, ChaseWork
from ..contract.facts import DeviceFacts, driver_names, facts_from_profile
from ..contract.profile import profiled_call
from .seeding import point_seed


class SimBackend(Backend):
    kind = "sim"
    calls_are_launches = True

    def __init__(self, *, profile_path: str | os.PathLike, seed: int = 0) -> None:
        from ..sim.profile import load_profile, profile_sha256

        self.profile_path = os.fspath(profile_path)
        self.profile = load_profile(self.profile_path)
        self.profile_hash = profile_sha256(self.profile_path)
        self.seed = seed
        self._launch_profiles: dict[tuple[int | None, int], Any] = {}

    def device_info(self) -> dict[str, Any]:
        p = self.profile
        return {
            "backend": "sim",
            "name": p.gpu,
            "profile": p.name,
            "profile_path": self.profile_path,
            "profile_sha256": self.profile_hash,
            "compute_capability": p.compute_capability,
            "seed": self.seed,
            "sm_clock_mhz": p.clocks.sm_mhz,
            "memory_clock_mhz": p.clocks.memory_mhz,
            # what its driver would report, by the topology's names (topology/driver.py): a
            # topology, and a twin made from it, carry them as a GPU's carry its driver's
            "facts": driver_names(self.facts()),
        }

    def facts(self) -> DeviceFacts:
        return facts_from_profile(self.profile)

    def load_handlers(self) -> None:
        # the handlers of the families' own work types live on the backend side, so that no
        # experiment imports a backend; they register themselves with `handles` on import
        from . import (  # noqa: F401
            bandwidth_sim,
            banks_sim,
            l2slices_sim,
            mapping_sim,
            multichase_sim,
            node_sim,
            pointer_walk_sim,
            requests_sim,
            throughput_sim,
            timing_sim,
        )

    @property
    def supports_carveout(self) -> bool:
        return self.profile.carveout is not None

    def profile_for(self, carveout_pct: int | None, shared_bytes: int):
        """The profile of one launch: with a `carveout` block, its cache holds what the
        kernel's shared partition leaves (sim/carveout.py); otherwise the profile as it is."""
        c = self.profile.carveout
        if c is None:
            return self.profile
        key = (carveout_pct, shared_bytes)
        if key not in self._launch_profiles:
            spec = self.profile.caches[c.cache]
            data = c.l1_data_bytes(carveout_pct, shared_bytes)
            data = None if data >= spec.lines * spec.line_bytes else data
            caches = {**self.profile.caches, c.cache: replace(spec, data_bytes=data)}
            self._launch_profiles[key] = replace(self.profile, caches=caches)
        return self._launch_profiles[key]

    def has_path(self, path: str) -> bool:
        return path in self.profile.paths

    def clocks(self) -> dict[str, float]:
        c = self.profile.clocks
        return {"sm_clock_mhz": float(c.sm_mhz), "memory_clock_mhz": float(c.memory_mhz)}

    @profiled_call
    def run_chase(
        self, work: ChaseWork, *, carveout_pct: int | None, seed: int = 0, page_map=None
    ) -> ChaseResult:
        """One P-chase launch; `page_map` (sim.tlb.PageMap) places the array's virtual chunks
        in physical memory (None: physical = virtual)."""
        from ..sim.engine import SimGPU

        profile = self.profile_for(carveout_pct, work.shared_buffer_bytes)
        gpu = SimGPU(profile, seed=point_seed(self.seed, seed))
        gpu.set_page_map(page_map)
        if work.chain is None:
            # sparse array: walk it here (the same walk the kernel makes) and time the loads
            steps = work.warmup_steps + work.record_steps
            positions = work.walk(steps + 1)
            addresses = positions[:steps] * work.element_bytes
            latency = gpu.load_sequence(work.path, addresses)[work.warmup_steps :]
            return ChaseResult(
                latency_cycles=np.asarray(latency, dtype=np.uint32),
                indices=positions[work.warmup_steps + 1 :].astype(np.uint32),
                sm_clock_mhz=float(self.profile.clocks.sm_mhz),
            )
        latency, indices = gpu.chase(
            work.path,
            work.chain,
            element_bytes=work.element_bytes,
            base_address_bytes=0,
            start_index=work.start_index,
            warmup_steps=work.warmup_steps,
            record_steps=work.record_steps,
        )
        return ChaseResult(
            latency_cycles=np.asarray(latency, dtype=np.uint32),
            indices=np.asarray(indices, dtype=np.uint32),
            sm_clock_mhz=float(self.profile.clocks.sm_mhz),
        )
