"""Digital twins of measured GPUs: a device profile from a topology document (`twin_profile`),
the agreement of a GPU's topology with its twin's (`agreement`), and the simulator
configuration options a topology determines (`accel_sim`)."""

from .build import MODELLED, Twin, twin_profile
from .write import write_twin

__all__ = ["MODELLED", "Twin", "twin_profile", "write_twin"]
