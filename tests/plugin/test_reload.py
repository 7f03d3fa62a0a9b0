"""SIGHUP reload: a valid config re-registers what changed, an invalid one is logged and the old one keeps serving."""

from __future__ import annotations

import queue
import signal
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from gpuslice.discovery import Backend, MigControl, RecordingMigControl, parse_node_spec
from gpuslice.gpu import Node
from gpuslice.kubelet import MockKubelet
from gpuslice.mps import FakeMpsControl
from tests.support.hostile import BOMB
from tests.support.plugin import build_app
from tests.support.process import plugin_process
from tests.support.specs import h100_mig_spec

WAIT_S = 20.0
MIG_SPEC = h100_mig_spec("reload")
MIXED = "flags: {migStrategy: mixed}\n"
SHARE_1G = MIXED + "sharing: {timeSlicing: {resources: [{name: mig-1g.10gb, replicas: 3}]}}\n"
SHARE_GPU = "sharing: {timeSlicing: {renameByDefault: true, resources: [{name: gpu, replicas: 4}]}}\n"
MPS = "flags: {mpsRoot: %s}\nsharing: {mps: {resources: [{name: gpu, replicas: 2}]}}\n"
INVALID = "sharing: {timeSlicing: {resources: []}}\n"


class Running:
    """An in-process PluginApp (NVIDIA's answers, a fake MPS control), against the mock kubelet."""

    def __init__(self, kubelet: MockKubelet, workdir: Path, spec: str, config: str) -> None:
        self.control = FakeMpsControl()
        self.app = build_app(workdir, config, kubelet, backend=spec, mps_control=self.control, nvidia_answers=True)
        self.app.start()
        self.reloader = self.app.reloader
        self.manager = self.app.manager
        assert self.app.options.config_file is not None
        self.config_file = Path(self.app.options.config_file)

    def reload(self, config: str) -> bool:
        self.config_file.write_text(config)
        return self.app.reload()

    def stop(self) -> None:
        self.app.stop()


@pytest.fixture
def running(kubelet: MockKubelet, workdir: Path) -> Iterator[list[Running]]:
    started: list[Running] = []
    yield started
    for plugin in started:
        plugin.stop()


def start(running: list[Running], kubelet: MockKubelet, workdir: Path, spec: str, config: str) -> Running:
    plugin = Running(kubelet, workdir, spec, config)
    running.append(plugin)
    return plugin


def test_only_the_changed_resource_registers_again(kubelet: MockKubelet, workdir: Path, running: list[Running]) -> None:
    plugin = start(running, kubelet, workdir, MIG_SPEC, MIXED)
    assert kubelet.wait_for(resource="nvidia.com/mig-1g.10gb", allocatable=4, timeout=WAIT_S)
    assert kubelet.wait_for(resource="nvidia.com/mig-3g.40gb", allocatable=2, timeout=WAIT_S)
    assert plugin.reload(SHARE_1G)
    assert kubelet.wait_for(resource="nvidia.com/mig-1g.10gb", allocatable=12, min_registrations=2, timeout=WAIT_S)
    assert kubelet.registration_count("nvidia.com/mig-3g.40gb") == 1, "an unchanged resource keeps its registration"
    assert kubelet.admit_one("pod", "nvidia.com/mig-1g.10gb").device_ids[0].endswith("::0")


def test_a_new_config_source_applies_as_sighup_does_and_stays_the_source(
    kubelet: MockKubelet, workdir: Path, running: list[Running]
) -> None:
    plugin = start(running, kubelet, workdir, MIG_SPEC, MIXED)
    assert kubelet.wait_for(resource="nvidia.com/mig-1g.10gb", allocatable=4, timeout=WAIT_S)
    per_node = workdir / "per-node.yaml"
    per_node.write_text(SHARE_1G)
    assert plugin.app.reload(per_node)  # a node-label watch picking another config calls this
    assert kubelet.wait_for(resource="nvidia.com/mig-1g.10gb", allocatable=12, min_registrations=2, timeout=WAIT_S)
    assert plugin.reloader.config_source == per_node
    broken = workdir / "broken.yaml"
    broken.write_text(INVALID)
    assert not plugin.app.reload(broken), "a bad new source is refused"
    assert plugin.reloader.config_source == per_node, "and the source stays the one that serves"
    per_node.write_text(MIXED)
    assert plugin.app.reload(), "SIGHUP now re-reads the new source"
    assert kubelet.wait_for(resource="nvidia.com/mig-1g.10gb", allocatable=4, min_registrations=3, timeout=WAIT_S)


def test_an_invalid_config_is_refused_and_the_old_one_keeps_serving(
    kubelet: MockKubelet, workdir: Path, running: list[Running], caplog: pytest.LogCaptureFixture
) -> None:
    plugin = start(running, kubelet, workdir, MIG_SPEC, SHARE_1G)
    assert kubelet.wait_for(resource="nvidia.com/mig-1g.10gb", allocatable=12, timeout=WAIT_S)
    for bad in (
        INVALID,
        MIXED + "sharing: {mps: {resources: [{name: gpu, replicas: 2}]}}",
        "flags: {migStrategy: single}",
        BOMB,  # an alias bomb or a runaway count must not reach a running plugin's memory either
        "sharing: {timeSlicing: {resources: [{name: gpu, replicas: 100000000}]}}",
    ):
        assert not plugin.reload(bad)
    assert "reload refused, still serving the previous config" in caplog.text
    assert "no resources specified" in caplog.text and "more than one MIG device type" in caplog.text
    assert "expands to more than" in caplog.text and "over the limit of 16384" in caplog.text
    assert plugin.reloader.failed_reloads == 5 and plugin.reloader.served.config.sharing.time_slicing is not None
    assert kubelet.registration_count("nvidia.com/mig-1g.10gb") == 1
    assert kubelet.admit_one("pod", "nvidia.com/mig-1g.10gb").device_ids[0].startswith("MIG-")


def test_switching_to_mps_starts_the_daemons_and_back_stops_them(
    kubelet: MockKubelet, workdir: Path, running: list[Running]
) -> None:
    plugin = start(
        running,
        kubelet,
        workdir,
        "name: m\ngpus: [{model: NVIDIA H100 80GB HBM3, count: 2, memory_mib: 81559, compute_capability: '9.0'}]\n",
        "",
    )
    root = workdir / "mps"
    assert plugin.reload(MPS % root)
    assert kubelet.wait_for(resource="nvidia.com/gpu", allocatable=4, timeout=WAIT_S)
    pipe = str(root / "nvidia.com/gpu/pipe")
    assert plugin.control.daemons[pipe].commands[-1] == "set_default_active_thread_percentage 50"
    allocation = kubelet.admit_one("pod", "nvidia.com/gpu")
    assert allocation.envs["CUDA_MPS_PIPE_DIRECTORY"] == "/mps/nvidia.com/gpu/pipe"
    assert allocation.envs["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=40779M"
    assert ("/mps/nvidia.com/gpu/pipe", str(root / "nvidia.com/gpu/pipe"), False) in allocation.mounts
    assert plugin.reload("")
    assert plugin.control.stopped == [pipe] and plugin.control.daemons == {}
    assert kubelet.wait_for(resource="nvidia.com/gpu", allocatable=2, min_registrations=3, timeout=WAIT_S)


def test_cdi_spec_follows_the_config(kubelet: MockKubelet, workdir: Path, running: list[Running]) -> None:
    plugin = start(running, kubelet, workdir, MIG_SPEC, MIXED)
    spec = workdir / "cdi" / "k8s.device-plugin.nvidia.com-gpu.json"
    assert not spec.exists()
    assert plugin.reload("flags: {migStrategy: mixed, plugin: {deviceListStrategy: cdi-cri}}")
    assert spec.exists()
    assert kubelet.wait_for(resource="nvidia.com/mig-3g.40gb", allocatable=2, timeout=WAIT_S)
    allocation = kubelet.admit_one("pod", "nvidia.com/mig-3g.40gb")
    assert allocation.cdi_devices == [f"k8s.device-plugin.nvidia.com/gpu={allocation.device_ids[0]}"]
    assert "NVIDIA_VISIBLE_DEVICES" not in allocation.envs


# --- the real process: `gpuslice plugin` receives SIGHUP ---


class StderrLines:
    """Reads a process's stderr on a thread, so the test can wait for a line without blocking forever."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        assert process.stderr is not None
        stream = process.stderr

        def pump() -> None:
            for line in stream:
                self.lines.put(line)

        self.thread = threading.Thread(target=pump, daemon=True)
        self.thread.start()

    def wait_for(self, text: str, timeout: float = WAIT_S) -> bool:
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                return False
            self.seen.append(line)
            if text in line:
                return True


def test_sighup_to_the_plugin_process(kubelet: MockKubelet, workdir: Path) -> None:
    config = workdir / "config.yaml"
    config.write_text("version: v1\n")
    args = ["--backend", "fake", "--node-spec", "preset:h100x4", "--config-file", str(config)]
    process = plugin_process([*args, "--kubelet-socket", str(kubelet.socket_path)], stdout=subprocess.DEVNULL)
    stderr = StderrLines(process)
    try:
        assert kubelet.wait_for(resource="nvidia.com/gpu", allocatable=4, timeout=WAIT_S)
        config.write_text(SHARE_GPU)
        process.send_signal(signal.SIGHUP)
        assert kubelet.wait_for(resource="nvidia.com/gpu.shared", allocatable=16, timeout=WAIT_S)
        assert kubelet.wait_for(resource="nvidia.com/gpu", allocatable=0, timeout=WAIT_S), "the old name is gone"
        config.write_text(INVALID)
        process.send_signal(signal.SIGHUP)
        assert stderr.wait_for("reload refused, still serving the previous config"), stderr.seen
        assert kubelet.registration_count("nvidia.com/gpu.shared") == 1
        assert kubelet.admit_one("pod", "nvidia.com/gpu.shared").device_ids[0].endswith("::0")
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=WAIT_S) == 0
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
        stderr.thread.join(timeout=WAIT_S)


class BrokenBackend(Backend):
    """Discovery that fails, as NVML can after a driver problem."""

    name = "broken"

    def discover(self) -> Node:
        raise RuntimeError("NVML: driver/library version mismatch")


def test_a_failing_discovery_keeps_the_old_config(
    kubelet: MockKubelet, workdir: Path, running: list[Running], caplog: pytest.LogCaptureFixture
) -> None:
    plugin = start(running, kubelet, workdir, MIG_SPEC, MIXED)
    assert kubelet.wait_for(resource="nvidia.com/mig-3g.40gb", allocatable=2, timeout=WAIT_S)
    plugin.reloader.backend = BrokenBackend()
    assert not plugin.reload(SHARE_1G)
    assert "driver/library version mismatch" in caplog.text
    assert kubelet.admit_one("pod", "nvidia.com/mig-3g.40gb").device_ids[0].startswith("MIG-")


# --- migStrategy dynamic: a reload keeps the geometry ---

DYNAMIC = "flags: {migStrategy: dynamic}\n"
DYNAMIC_SHARE_GPU = DYNAMIC + "sharing: {timeSlicing: {resources: [{name: gpu, replicas: 2}]}}\n"
THREE = "nvidia.com/mig-3g.40gb"
ONE = "nvidia.com/mig-1g.10gb"
H100 = {"model": "NVIDIA H100 80GB HBM3", "memory_mib": 81559, "compute_capability": "9.0"}


class LiveMigBackend(Backend):
    """Discovery as NVML does it: each GPU carries the MIG devices that exist right now (the control's)."""

    name = "live-mig"

    def __init__(self, node: Node, control: RecordingMigControl) -> None:
        self.node = node
        self.control = control

    def discover(self) -> Node:
        gpus = tuple(
            replace(gpu, mig_instances=tuple(self.control.instances[gpu.index].values())) for gpu in self.node.gpus
        )
        return replace(self.node, gpus=gpus)

    def mig_control(self, node: Node) -> MigControl | None:
        return self.control

    def assumes_device_nodes(self) -> bool:
        return True


class RunningDynamic:
    """An in-process PluginApp under migStrategy dynamic, against the mock kubelet."""

    def __init__(self, kubelet: MockKubelet, workdir: Path) -> None:
        node = parse_node_spec({"name": "reload-dyn", "gpus": [{**H100, "count": 1}, {**H100, "mig": []}]}).node
        self.control = RecordingMigControl(node)
        self.backend = LiveMigBackend(node, self.control)
        self.app = build_app(
            workdir,
            DYNAMIC,
            kubelet,
            backend=self.backend,
            nvidia_answers=True,
            release_poll_s=0.05,
            admission_grace_s=30.0,
        )
        assert self.app.dynamic_mig is not None and self.app.options.config_file is not None
        self.runtime = self.app.dynamic_mig
        self.manager = self.app.manager
        self.reloader = self.app.reloader
        self.config_file = Path(self.app.options.config_file)
        self.app.manager.start()

    def reload(self, config: str) -> bool:
        self.config_file.write_text(config)
        return self.app.reload()


@pytest.fixture
def dynamic_plugin(kubelet: MockKubelet, workdir: Path) -> Iterator[RunningDynamic]:
    plugin = RunningDynamic(kubelet, workdir)
    yield plugin
    plugin.manager.stop()


def test_a_reload_under_dynamic_keeps_the_held_instance_and_the_geometry(
    kubelet: MockKubelet, dynamic_plugin: RunningDynamic, caplog: pytest.LogCaptureFixture
) -> None:
    plugin = dynamic_plugin
    assert kubelet.wait_for(resource=ONE, allocatable=7, timeout=WAIT_S)
    # each resource has its own stream: the 3g list may land after the 1g one (a loaded machine shows it)
    assert kubelet.wait_for(lambda views: THREE in views and views[THREE].allocatable > 0, timeout=WAIT_S)
    held = kubelet.admit_one("big", THREE).device_ids[0]
    assert kubelet.wait_for(resource=ONE, allocatable=3, timeout=WAIT_S)
    assert plugin.backend.discover().gpus != plugin.reloader.served.node.gpus, "discovery now shows the instance"
    before = plugin.reloader.served.plan

    assert plugin.reload(DYNAMIC_SHARE_GPU)
    assert kubelet.wait_for(resource="nvidia.com/gpu", allocatable=2, min_registrations=2, timeout=WAIT_S)
    assert [h.slot_id for h in plugin.runtime.geometry.holdings()] == [held]
    assert plugin.control.calls == [("create", 1, "3g.40gb", 0)], "nothing destroyed or created again"
    after = {r.name: r for r in plugin.reloader.served.plan.resources}
    assert all(after[r.name] == r for r in before.resources if r.name.startswith("nvidia.com/mig-"))
    assert kubelet.registration_count(THREE) == 1 and kubelet.registration_count(ONE) == 1
    assert kubelet.wait_for(resource=ONE, allocatable=3, timeout=WAIT_S), "blocked placements stay Unhealthy"
    assert kubelet.wait_for(resource="nvidia.com/mig-7g.80gb", allocatable=0, timeout=WAIT_S)

    assert not plugin.reload(MIXED)
    assert "switching from dynamic to mixed needs a restart" in caplog.text
    assert plugin.reloader.served.config.flags.mig_strategy == "dynamic"


def test_a_changed_gpu_under_dynamic_is_still_refused(
    dynamic_plugin: RunningDynamic, caplog: pytest.LogCaptureFixture
) -> None:
    plugin = dynamic_plugin
    plugin.backend.node = replace(plugin.backend.node, gpus=plugin.backend.node.gpus[1:])
    assert not plugin.reload(DYNAMIC_SHARE_GPU)
    assert "the node's GPUs changed" in caplog.text
