"""The twin's profile as a YAML file: a header that names its topology and every assumed value,
then the profile, checked by the simulator's own loader before it is moved into place."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import yaml

from .build import Twin


def render(twin: Twin, *, topology_path: str, command: str) -> str:
    head = [
        f"# Digital twin of {twin.profile['gpu'].removesuffix(' (twin)')}, generated from the "
        f"topology document {topology_path}",
        f"# by `{command}`. Every value cites the measured quantity, driver fact or",
        "# default it came from (config/README.md, 'Digital twins of a measured GPU').",
        f"# Assumed (the run left these undetermined): {len(twin.assumed)}",
    ]
    head += [f"#   {key}" for key, _ in twin.assumed]
    body = yaml.safe_dump(twin.profile, sort_keys=False, width=100, allow_unicode=True)
    return "\n".join(head) + "\n" + body


def write_twin(twin: Twin, out: str | os.PathLike, *, topology_path: str, command: str) -> Path:
    """Write the profile atomically, after the simulator's loader accepted it."""
    from ..sim.profile import load_profile

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".yaml", dir=out.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(render(twin, topology_path=topology_path, command=command))
        load_profile(tmp)
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out
