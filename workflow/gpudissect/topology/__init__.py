"""The topology document: a device's memory hierarchy, one value per element and quantity,
from every analysis of a run (`build_topology`), and the same content in MT4G's field names
(`to_mt4g`)."""

from .build import build_topology, validate_topology
from .mt4g import to_mt4g

__all__ = ["build_topology", "to_mt4g", "validate_topology"]
