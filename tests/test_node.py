"""The node family around its analysis: when the config runs it, the profile's links block, the
topology's node section against its schema, the report's table, and a small pipeline run of a
simulated node (tests/data/node_sim_config.yaml)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from kernel_cache import share_kernel_cache

from gpudissect.config import parse
from gpudissect.exceptions import ConfigError, ProfileError
from gpudissect.sim.profile import load_profile

REPO = Path(__file__).resolve().parents[1]
SIM_NODE = "tests/data/node2_sim.yaml"


def _cuda(name, index, **extra):
    return {"name": name, "backend": "cuda", "index": index, "arch": "sm_90", **extra}


def _runs_node(cfg):
    return {d.name: d.params["node"].gpus for d in cfg.devices if d.enabled("node")}


def test_two_cuda_devices_of_one_host_run_the_node_on_the_first():
    cfg = parse({"devices": [_cuda("gpu0", 0), _cuda("gpu1", 1)]})
    assert _runs_node(cfg) == {"gpu0": (("gpu0", 0), ("gpu1", 1))}


def test_a_fleet_of_one_gpu_per_host_is_no_node():
    # config/fleet.yaml: each device is index 0 of its own partition's host
    fleet = [
        _cuda("h100", 0, partition="gpu", gpu_model="h100"),
        _cuda("h200", 0, partition="gpu-h200", gpu_model="h200"),
    ]
    assert _runs_node(parse({"devices": fleet})) == {}
    with pytest.raises(ConfigError, match=r"node: true, but the cuda devices share an index"):
        parse({"devices": fleet, "node": True})


def test_node_false_turns_it_off_and_a_bad_value_names_the_key():
    assert _runs_node(parse({"devices": [_cuda("a", 0), _cuda("b", 1)], "node": False})) == {}
    with pytest.raises(ConfigError, match=r"node: 'yes' is not allowed"):
        parse({"devices": [_cuda("a", 0)], "node": "yes"})


def test_node_true_without_a_node_names_what_is_allowed():
    with pytest.raises(ConfigError, match=r"node: true, but the config has 1 cuda device") as e:
        parse({"devices": [_cuda("a", 0)], "node": True})
    assert "links block" in str(e.value)


def test_node_true_runs_on_a_sim_device_whose_profile_is_a_node():
    devices = [
        {"name": "n", "backend": "sim", "profile": SIM_NODE},
        {"name": "t", "backend": "sim", "profile": "tests/data/tiny_profile.yaml"},
    ]
    assert _runs_node(parse({"devices": devices, "node": True})) == {"n": ()}
    # without node: true a sim node runs nothing of it (the default pipeline is unchanged)
    assert _runs_node(parse({"devices": devices})) == {}


def test_the_default_config_runs_no_node():
    from gpudissect.config import load

    for name in ("config.yaml", "gpu.yaml", "fleet.yaml", "modern.yaml"):
        assert _runs_node(load(REPO / "config" / name, base_dir=REPO)) == {}, name


def test_node_configs_for_gpu_hosts():
    from gpudissect.config import load

    two = load(REPO / "config/node.yaml", base_dir=REPO)
    four = load(REPO / "config/node4.yaml", base_dir=REPO)
    assert [i for _, i in _runs_node(two)["gpu0"]] == [0, 1]
    assert [i for _, i in _runs_node(four)["gpu0"]] == [0, 1, 2, 3]


def test_node_parameters_are_checked_with_the_key_named():
    raw = {"devices": [_cuda("a", 0), _cuda("b", 1)]}
    bad = {"footprints_bytes": {"l1": 65536, "l2": 4096}}
    with pytest.raises(ConfigError, match=r"experiments\.node\.footprints_bytes: .* l1 < l2"):
        parse({**raw, "experiments": {"node": bad}})
    with pytest.raises(
        ConfigError, match=r"experiments\.node\.copy\.sizes_bytes\[1\]: 100 is not a"
    ):
        parse({**raw, "experiments": {"node": {"copy": {"sizes_bytes": [1024, 100]}}}})
    with pytest.raises(ConfigError, match=r"experiments\.node: unknown key\(s\) \['enabled'\]"):
        parse({**raw, "experiments": {"node": {"enabled": True}}})


def _profile_with(tmp_path, links: str) -> Path:
    text = (REPO / SIM_NODE).read_text().split("links:")[0] + links
    path = tmp_path / "p.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("links", "message"),
    [
        ("links:\n  gpus: 2\n  pairs: [{src: 0, dst: 2}]\n", r"links\.pairs\[0\]\.dst: 2 is not a"),
        ("links:\n  gpus: 2\n  pairs: [{src: 1, dst: 1}]\n", r"links\.pairs\[0\]: src and dst"),
        (
            "links:\n  gpus: 2\n  default: {peer_caches: [l3]}\n",
            r"links\.default\.peer_caches: \['l3'\] are not caches",
        ),
        ("links:\n  gpus: 1\n", r"links\.gpus"),
        ("links:\n  gpus: 2\n  default: {latency_cycles: -5}\n", r"links\.default\.latency"),
    ],
)
def test_bad_links_blocks_name_the_field(tmp_path, links, message):
    with pytest.raises(ProfileError, match=message):
        load_profile(_profile_with(tmp_path, links))


def test_a_profile_without_links_is_a_gpu_alone():
    assert load_profile(REPO / "tests/data/tiny_profile.yaml").links is None


def _copy_workflow(work: Path) -> dict[str, str]:
    """The workflow in `work`, and the environment a run there needs."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for item in ("Snakefile", "workflow", "config", "kernels", "envs", "profiles", "tests/data"):
        src, dst = REPO / item, work / item
        if src.is_dir():
            shutil.copytree(src, dst, ignore=ignore)
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(src, dst)
    share_kernel_cache(work)  # the simulator's kernels compiled once for the suite's copies
    bin_dir = str(Path(sys.executable).parent)
    return {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "HOME": str(work),
        "PYTHONPATH": str(work / "workflow"),
    }


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    work = tmp_path_factory.mktemp("node_pipeline")
    env = _copy_workflow(work)
    targets = ["results/report/report.md", "results/topology/node2.json"]
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", *targets, "--cores", "2"]
        + ["--configfile", "tests/data/node_sim_config.yaml"],
        cwd=work,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return work


@pytest.mark.slow
def test_pipeline_topology_has_a_valid_node_section(pipeline):
    from gpudissect.topology import validate_topology

    topo = json.loads((pipeline / "results/topology/node2.json").read_text())
    validate_topology(topo)
    pairs = {(p["src"], p["dst"]): p for p in topo["node"]["pairs"]}
    assert set(pairs) == {(0, 1), (1, 0)}
    assert pairs[(0, 1)]["caching"]["ca"]["l1_keeps_peer_lines"]["value"] is True
    assert pairs[(1, 0)]["caching"]["ca"]["l1_keeps_peer_lines"]["value"] is False


@pytest.mark.slow
def test_pipeline_report_has_the_node_table_and_heat_maps(pipeline):
    csv = (pipeline / "results/report/tables/node.csv").read_text().splitlines()
    assert csv[0].startswith("pair,link,peer access,ca hit / miss")
    assert [row.split(",")[0] for row in csv[1:]] == ["gpu0 -> gpu1", "gpu1 -> gpu0"]
    for stem in ("node_latency", "node_bandwidth", "node_streams"):
        assert (pipeline / f"results/figures/node2/{stem}.png").stat().st_size > 0
    assert "### The node: peer memory and links" in (
        pipeline / "results/report/report.md"
    ).read_text().replace("## The node", "### The node")


def test_topology_node_section_validates_and_a_broken_one_fails(tmp_path):
    from gpudissect.analysis.common.result import write_result
    from gpudissect.analysis.node.node import analyse
    from gpudissect.backends import open_backend
    from gpudissect.exceptions import TraceError
    from gpudissect.experiments import node as node_experiment
    from gpudissect.families import FAMILIES
    from gpudissect.topology import build_topology, validate_topology

    raw = {
        "devices": [{"name": "n", "backend": "sim", "profile": SIM_NODE}],
        "node": True,
        "experiments": {"node": {"record_steps": 32, "stream": {"sms": [1, 8]}}},
    }
    device = parse(raw).device("n")
    with open_backend(device) as backend:
        data = node_experiment.run(backend, device.params["node"], device=device)
    path = write_result(tmp_path / "node.json", analyse(data, provenance={"device": "n"}))
    topo = build_topology("n", [path], tuple(FAMILIES))
    validate_topology(topo)
    assert [p["peer_access"] for p in topo["node"]["pairs"]] == [True, True]
    del topo["node"]["pairs"][0]["peer_access"]
    with pytest.raises(TraceError, match="'peer_access' is a required property"):
        validate_topology(topo)


def test_nccl_multicast_stays_off_in_the_cuda_backend():
    # a sweep process sets NCCL_NVLS_ENABLE=0 before the CUDA driver starts, and no module of
    # the package creates a multicast object
    env = {k: v for k, v in os.environ.items() if not k.startswith("NCCL_")}
    code = "import gpudissect.backends.node_cuda, os; print(os.environ['NCCL_NVLS_ENABLE'])"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**env, "PYTHONPATH": str(REPO / "workflow")},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.strip() == "0"
    for path in (REPO / "workflow").rglob("*.py"):
        assert "cuMulticastCreate(" not in path.read_text(), path
    for path in (REPO / "kernels").glob("*.cu"):
        assert "multimem." not in path.read_text(), path  # the PTX multicast instructions


def test_a_node_sweep_asks_for_every_gpu_of_the_node_on_one_node(tmp_path):
    # the plan of config/node4.yaml (a dry run: no GPU here): one sweep, on the first GPU,
    # holding all four GPUs on one node; the other GPUs run nothing and get no report part
    work = tmp_path / "plan"
    env = _copy_workflow(work)
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--cores", "4", "--resources", "gpu=8"]
        + ["--configfile", "config/node4.yaml", "--config", "cuda_arch=sm_90"],
        cwd=work,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    sweeps = [block for block in out.split("\n\n") if "rule run_sweep:" in block]
    assert len(sweeps) == 1 and "wildcards: device=gpu0, experiment=node" in sweeps[0]
    assert "nodes=1" in sweeps[0] and "gpu=4" in sweeps[0]
    assert "results/topology/gpu0.json" in out and "results/topology/gpu1.json" not in out


def test_repeats_compare_the_node_readings_and_mark_the_topology(tmp_path):
    from gpudissect.analysis.common.result import write_result
    from gpudissect.analysis.node.node import analyse
    from gpudissect.backends import open_backend
    from gpudissect.families import FAMILIES
    from gpudissect.topology import build_topology, validate_topology
    from gpudissect.topology.repeats import compare_repeats

    raw = {
        "devices": [{"name": "n", "backend": "sim", "profile": SIM_NODE, "seed": 4}],
        "node": True,
        "experiments": {
            "node": {"record_steps": 32, "stream": {"sms": [8]}, "tlb": {"enabled": False}}
        },
    }
    docs = []
    for repeat in (1, 2):
        device = parse(raw).device("n").for_repeat(repeat)
        with open_backend(device) as backend:
            data = node_experiment_run(backend, device)
        docs.append(analyse(data, provenance={"device": "n"}))
    # the second repeat reads the other answer for one cache (as a flaky GPU reading would)
    flipped = docs[1]["node"]["pairs"][0]["caching"]["ca"]["l1_keeps_peer_lines"]
    flipped["value"] = not flipped["value"]
    paths = [
        write_result(tmp_path / "node.json", docs[0]),
        write_result(tmp_path / "node.r2.json", docs[1]),
    ]
    repeats = compare_repeats("n", [str(p) for p in paths])
    assert repeats["does_not_repeat"] == [
        "node/pairs/0/caching/ca.l1_keeps_peer_lines"
        " (node /node/pairs/0/caching/ca/l1_keeps_peer_lines)"
    ]
    topo = build_topology("n", [paths[0]], tuple(FAMILIES), repeats=repeats)
    validate_topology(topo)
    pair = topo["node"]["pairs"][0]
    assert pair["caching"]["ca"]["l1_keeps_peer_lines"]["undetermined"].startswith(
        "does not repeat"
    )
    assert pair["latency"]["ca"]["miss_latency_cycles"]["repeat_spread"]["repeats"] == 2


def node_experiment_run(backend, device):
    from gpudissect.experiments import node as node_experiment

    return node_experiment.run(backend, device.params["node"], device=device)


class _FakeNvml:
    """pynvml as NVML answers on a host of three GPUs: GPUs 0 and 1 joined by 18 NVLinks (4.0),
    GPU 2 on NVSwitches by 2 links, every pair under one PCIe host bridge."""

    NVML_TOPOLOGY_HOSTBRIDGE = 30
    NVML_TOPOLOGY_SYSTEM = 50
    NVML_NVLINK_DEVICE_TYPE_SWITCH = 2

    class _Pci:
        def __init__(self, bus: str) -> None:
            self.busId = bus.encode()

    BUS = {0: "00000000:18:00.0", 1: "00000000:2A:00.0", 2: "00000000:3B:00.0"}

    def nvmlInit(self):
        pass

    def nvmlDeviceGetHandleByPciBusId(self, bus):
        return {"0000:18:00.0": 0, "0000:2a:00.0": 1, "0000:3b:00.0": 2}[bus.lower()]

    def nvmlDeviceGetNvLinkState(self, h, link):
        return 1 if (h in (0, 1) and link < 18) or (h == 2 and link < 2) else 0

    def nvmlDeviceGetNvLinkVersion(self, h, link):
        return 4

    def nvmlDeviceGetNvLinkRemotePciInfo_v2(self, h, link):
        if h == 2:
            return self._Pci("00000000:99:00.0")  # an NVSwitch
        return self._Pci(self.BUS[1 - h])

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, h, link):
        return 2 if h == 2 else 0

    def nvmlDeviceGetTopologyCommonAncestor(self, a, b):
        return 30


def test_nvml_link_facts_count_direct_links_and_name_the_ancestor(monkeypatch):
    from gpudissect.backends import node_cuda

    monkeypatch.setitem(sys.modules, "pynvml", _FakeNvml())
    nvml = node_cuda._Nvml({0: "0000:18:00.0", 1: "0000:2A:00.0", 2: "0000:3B:00.0"})
    assert nvml.nvlinks(0, 1) == ("nvlink", 18, 4)
    assert nvml.nvlinks(1, 0) == ("nvlink", 18, 4)
    # GPU 0's links all end at GPU 1: none reaches GPU 2
    assert nvml.nvlinks(0, 2) == ("", 0, 0)
    assert nvml.nvlinks(2, 0) == ("nvswitch", 2, 4)
    assert nvml.common_ancestor(0, 1) == "NVML_TOPOLOGY_HOSTBRIDGE"


def test_nvml_absent_leaves_the_links_unknown(monkeypatch):
    from gpudissect.backends import node_cuda

    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    nvml = node_cuda._Nvml({0: "0000:18:00.0"})
    assert nvml.nvlinks(0, 0) == ("", 0, 0) and nvml.common_ancestor(0, 0) == ""


class _FakeDriver:
    """Just enough of pycuda.driver for the node session: a context stack, peer access as a
    table, allocations that remember the context they were made in."""

    class LogicError(Exception):
        pass

    def __init__(self, access: set[tuple[int, int]]) -> None:
        self.stack: list = []
        self.access = access
        self.enabled: list[tuple[int, int]] = []
        driver = self

        class Context:
            def __init__(self, gpu: int) -> None:
                self.gpu = gpu

            def push(self) -> None:
                driver.stack.append(self)

            @staticmethod
            def pop() -> None:
                driver.stack.pop()

            @staticmethod
            def enable_peer_access(peer) -> None:
                driver.enabled.append((driver.stack[-1].gpu, peer.gpu))

        self.Context = Context

    def mem_alloc(self, nbytes: int):
        driver = self

        class Alloc:
            gpu = driver.stack[-1].gpu

            def free(self) -> None:
                assert driver.stack[-1].gpu == self.gpu, "freed in another GPU's context"

        return Alloc()

    def mem_get_info(self):
        return (1000 + self.stack[-1].gpu, 2000)


def _fake_backend_type(driver: _FakeDriver, opened: list):
    class Device:
        def __init__(self, gpu: int) -> None:
            self.gpu = gpu

        def can_access_peer(self, other) -> bool:
            return (self.gpu, other.gpu) in driver.access

    class Backend:
        def __init__(self, *, index: int, cubin_dir=None, exclusive: bool = False) -> None:
            self.drv, self.index, self.cubin_dir = driver, index, cubin_dir
            self.device, self.context = Device(index), driver.Context(index)
            self.exclusive, self.closed, self._closers = exclusive, False, []
            driver.stack.append(self.context)  # make_context leaves it current
            opened.append(self)

        def on_close(self, fn) -> None:
            self._closers.append(fn)

        def close(self) -> None:
            for fn in self._closers:
                fn(self)
            assert driver.stack.pop() is self.context, "closed while another context was current"
            self.closed = True

    return Backend


def test_node_session_keeps_the_first_gpus_context_current_and_gives_every_gpu_back():
    from gpudissect.backends.node_cuda import _Session

    driver = _FakeDriver(access={(0, 1), (1, 0), (0, 2), (2, 0)})  # 1 and 2 see only 0
    opened: list = []
    lead = _fake_backend_type(driver, opened)(index=0, exclusive=True)
    session = _Session(lead, (0, 1, 2))
    assert driver.stack == [lead.context]
    assert all(b.exclusive for b in opened)  # every GPU's measurement lock is held
    assert sorted(driver.enabled) == [(0, 1), (0, 2), (1, 0), (2, 0)]
    assert session.access[(1, 2)] is False and session.access[(0, 1)] is True
    buf = session.buffer(2, "stream", 64)
    assert buf.gpu == 2 and driver.stack == [lead.context]  # made in GPU 2's context
    with session.on(1) as b:
        assert b.index == 1 and driver.stack[-1].gpu == 1
    assert [session.free_bytes(g) for g in (0, 1, 2)] == [1000, 1001, 1002]
    lead.close()
    assert driver.stack == [] and all(b.closed for b in opened)
