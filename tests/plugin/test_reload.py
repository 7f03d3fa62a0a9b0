"""SIGHUP reload: a valid config re-registers what changed, an invalid one is logged and the old one keeps serving."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuslice.config import parse_config_text
from gpuslice.discovery import FakeBackend
from gpuslice.gpu import Node
from gpuslice.kubelet import MockKubelet
from gpuslice.mps import FakeMpsControl
from gpuslice.plugin.compat import CompatOptions, allocate_options
from gpuslice.plugin.reload import ConfigReloader
from gpuslice.plugin.run import assemble_manager
from gpuslice.sharing import build_resources

WAIT_S = 20.0
MIG_SPEC = """\
name: reload
gpus:
  - model: NVIDIA H100 80GB HBM3
    count: 2
    memory_mib: 81559
    compute_capability: "9.0"
    mig: [1g.10gb, 1g.10gb, 3g.40gb]
"""
MIXED = "flags: {migStrategy: mixed}\n"
SHARE_1G = MIXED + "sharing: {timeSlicing: {resources: [{name: mig-1g.10gb, replicas: 3}]}}\n"
SHARE_GPU = "sharing: {timeSlicing: {renameByDefault: true, resources: [{name: gpu, replicas: 4}]}}\n"
MPS = "flags: {mpsRoot: %s}\nsharing: {mps: {resources: [{name: gpu, replicas: 2}]}}\n"
INVALID = "sharing: {timeSlicing: {resources: []}}\n"


class Running:
    """An in-process plugin with a ConfigReloader, against the mock kubelet."""

    def __init__(self, kubelet: MockKubelet, workdir: Path, spec: str, config: str) -> None:
        self.config_file = workdir / "config.yaml"
        self.config_file.write_text(config)
        spec_file = workdir / "node.yaml"
        spec_file.write_text(spec)
        self.backend = FakeBackend.from_ref(str(spec_file))
        self.control = FakeMpsControl()
        self.options = CompatOptions.for_fake_backend(cdi_dir=str(workdir / "cdi"))
        loaded = parse_config_text(config).config
        node = self.backend.discover()
        plan = build_resources(node, loaded)
        served, _ = ConfigReloader.prepare(loaded, node, plan, self.options)
        options = allocate_options(loaded, served.settings)
        self.manager = assemble_manager(plan, node, loaded, kubelet.socket_path, workers=8, options=options)
        self.reloader = ConfigReloader(
            self.manager, served, self.config_file, self.backend, self.options, mps_control=self.control
        )
        self.reloader.start_extras()
        self.manager.start()

    def reload(self, config: str) -> bool:
        self.config_file.write_text(config)
        return self.reloader.reload()

    def stop(self) -> None:
        self.manager.stop()
        self.reloader.stop()


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


def test_an_invalid_config_is_refused_and_the_old_one_keeps_serving(
    kubelet: MockKubelet, workdir: Path, running: list[Running], caplog: pytest.LogCaptureFixture
) -> None:
    plugin = start(running, kubelet, workdir, MIG_SPEC, SHARE_1G)
    assert kubelet.wait_for(resource="nvidia.com/mig-1g.10gb", allocatable=12, timeout=WAIT_S)
    for bad in (
        INVALID,
        MIXED + "sharing: {mps: {resources: [{name: gpu, replicas: 2}]}}",
        "flags: {migStrategy: single}",
    ):
        assert not plugin.reload(bad)
    assert "reload refused, still serving the previous config" in caplog.text
    assert "no resources specified" in caplog.text and "more than one MIG device type" in caplog.text
    assert plugin.reloader.failed_reloads == 3 and plugin.reloader.served.config.sharing.time_slicing is not None
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
    env = {k: v for k, v in os.environ.items() if k not in ("NODE_SPEC", "CONFIG_FILE", "KUBELET_SOCKET")}
    process = subprocess.Popen(
        [sys.executable, "-m", "gpuslice", "plugin", "--backend", "fake", "--node-spec", "preset:h100x4",
         "--config-file", str(config), "--kubelet-socket", str(kubelet.socket_path)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
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


class BrokenBackend:
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
