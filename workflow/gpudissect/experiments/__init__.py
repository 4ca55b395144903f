"""Experiment families. Each builds its work once; any backend executes it.

`REGISTRY` maps an experiment name (as in the config's `experiments:` section) to the function
that runs its whole sweep on a backend and returns a trace table, and to its declared schema.
"""

from __future__ import annotations

from . import l1_size

REGISTRY = {
    "l1_size": l1_size,
}
