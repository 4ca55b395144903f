"""The commands of digital twins: a device profile from a topology document (`twin`), a GPU's
topology against its twin's (`agreement`) and the simulator options a topology determines
(`export`). `gpudissect.cli` adds them to its parser."""

from __future__ import annotations

import argparse
import json
import re
import shlex
from pathlib import Path

from .exceptions import ConfigError

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def _load(path: str, option: str) -> dict:
    try:
        with open(path) as f:
            doc = json.load(f)
    except FileNotFoundError:
        raise ConfigError(
            f"{option} {path!r}: no such file; allowed: a topology document"
        ) from None
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{option} {path!r}: not JSON ({exc}); allowed: a topology document"
        ) from None
    from .topology import validate_topology

    validate_topology(doc)
    return doc


def cmd_twin(args: argparse.Namespace) -> int:
    from .twin import twin_profile, write_twin

    topology = _load(args.topology, "--topology")
    name = args.name or Path(args.out).stem
    if not _NAME.match(name):
        raise ConfigError(
            f"--name {name!r}: not a profile name; allowed: letters, digits, '_', '.', '-', "
            "starting with a letter or digit"
        )
    twin = twin_profile(topology, name=name, base=str(Path(args.topology).resolve().parent))
    command = f"gpudissect twin --topology {args.topology} --out {args.out}"
    out = write_twin(twin, args.out, topology_path=args.topology, command=command)
    print(f"twin profile written: {out} ({len(twin.assumed)} values assumed)")
    return 0


def cmd_agreement(args: argparse.Namespace) -> int:
    from .analysis.common.result import write_result
    from .twin.agreement import compare_topologies, counts_line, different_gpus, to_markdown

    gpu, twin = _load(args.gpu, "--gpu"), _load(args.twin, "--twin")
    differ = different_gpus(gpu, twin)
    if differ and not args.allow_different_gpus:
        raise ConfigError(
            f"agreement: --gpu {args.gpu} and --twin {args.twin} describe different GPUs "
            f"({differ}); allowed: a GPU's topology and its own twin's, or pass "
            "--allow-different-gpus to compare them anyway"
        )
    doc = compare_topologies(gpu, twin)
    out = write_result(args.out, doc)
    if args.md:
        Path(args.md).write_text(to_markdown(doc))
    print(f"agreement written: {out}: {counts_line(doc)}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from .twin.accel_sim import accel_sim_config

    topology = _load(args.topology, "--topology")
    if args.l2_slices is not None and args.l2_slices < 1:
        raise ConfigError(f"--l2-slices {args.l2_slices}: allowed: a whole number >= 1")
    argv = ["gpudissect", "export", "--format", args.format, "--topology", args.topology]
    if args.l2_slices:
        argv += ["--l2-slices", str(args.l2_slices)]
    text = accel_sim_config(
        topology,
        l2_slices=args.l2_slices,
        command=shlex.join(argv),
        base=str(Path(args.topology).resolve().parent),
    )
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)
        print(f"accel-sim options written: {args.out}")
    else:
        print(text, end="")
    return 0


def add_twin_commands(sub) -> None:
    """The `twin`, `agreement` and `export` subcommands, on the parser's subparsers `sub`."""
    s = sub.add_parser("twin", help="a simulator device profile (digital twin) from a topology")
    s.add_argument(
        "--topology", required=True, help="the topology document (results/topology/<device>.json)"
    )
    s.add_argument(
        "--out", required=True, help="the profile YAML to write (e.g. config/devices/<name>.yaml)"
    )
    s.add_argument(
        "--name", help="the profile's name (default: the file name of --out without .yaml)"
    )
    s.set_defaults(func=cmd_twin)

    s = sub.add_parser("agreement", help="a GPU's topology against the one recovered from its twin")
    s.add_argument("--gpu", required=True, help="the GPU's topology document")
    s.add_argument("--twin", required=True, help="the topology document of the twin's run")
    s.add_argument("--out", required=True, help="the agreement document (.json) to write")
    s.add_argument("--md", help="also write the agreement table as Markdown here")
    s.add_argument(
        "--allow-different-gpus",
        action="store_true",
        help="compare topologies whose GPU model, compute capability or UUID differ",
    )
    s.set_defaults(func=cmd_agreement)

    s = sub.add_parser("export", help="simulator configuration options that a topology determines")
    s.add_argument("--topology", required=True, help="the topology document")
    s.add_argument(
        "--format",
        choices=("accel-sim",),
        default="accel-sim",
        help="accel-sim: GPGPU-Sim/Accel-Sim gpgpusim.config options, one comment per line",
    )
    s.add_argument(
        "--l2-slices",
        type=int,
        help="L2 slices (memory sub-partitions) in all, if you know them: Accel-Sim's L2 sets "
        "are per slice, and the run measures no slice map (default: the L2 line is left to you)",
    )
    s.add_argument("--out", help="the file to write (default: standard output)")
    s.set_defaults(func=cmd_export)
