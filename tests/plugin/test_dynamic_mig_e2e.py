"""Dynamic MIG over real gRPC: create, overlap, release via pod-resources, races, restart, corrupt checkpoint."""

from __future__ import annotations

import json
import logging
import random
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from gpuslice.discovery import MigControlError, RecordingMigControl, parse_node_spec
from gpuslice.gpu import MigInstance, Node
from gpuslice.gpu.mig import H100_80GB
from gpuslice.kubelet import MockKubelet
from gpuslice.plugin.dynamic_settings import POD_RESOURCES_SOCKET_ENV, pod_resources_socket
from gpuslice.sharing.dynamic.checkpoint import CORRUPT_SUFFIX, read_checkpoint
from gpuslice.sharing.dynamic.geometry import slot_id
from gpuslice.wire import DEFAULT_POD_RESOURCES_SOCKET
from tests.support.plugin import build_app, fake_backend
from tests.support.process import finish, plugin_process

from .rpc import TIMEOUT_S, PluginClient, allocate_request

WAIT_S = 10.0
H100 = {"model": "NVIDIA H100 80GB HBM3", "memory_mib": 81559, "compute_capability": "9.0"}
ONE = "nvidia.com/mig-1g.10gb"
THREE = "nvidia.com/mig-3g.40gb"
SEVEN = "nvidia.com/mig-7g.80gb"


def dynamic_spec(count: int = 1) -> dict[str, Any]:
    return {"name": "dyn-e2e", "gpus": [{**H100, "count": count, "mig": []}]}


def dynamic_node(count: int = 1) -> Node:
    return parse_node_spec(dynamic_spec(count)).node


class DynamicPlugin:
    """Our plugin for a dynamic-MIG node: the PluginApp's servers and dynamic-MIG runtime, no kubelet watcher."""

    def __init__(self, count: int, kubelet: MockKubelet, control: Any, workdir: Path, grace_s: float) -> None:
        self.app = build_app(
            workdir,
            "flags: {migStrategy: dynamic}",
            kubelet,
            backend=fake_backend(dynamic_spec(count), mig_control=control),
            release_poll_s=0.05,
            admission_grace_s=grace_s,
        )
        assert self.app.dynamic_mig is not None
        self.node = self.app.node
        self.plan = self.app.plan
        self.runtime = self.app.dynamic_mig
        self.manager = self.app.manager

    def start(self) -> DynamicPlugin:
        self.manager.start()
        return self

    def stop(self) -> None:
        self.manager.stop()

    def socket(self, resource: str) -> Path:
        return next(s.socket_path for s in self.manager.servers if s.resource_name == resource)


StartDynamic = Callable[..., DynamicPlugin]


@pytest.fixture
def control() -> RecordingMigControl:
    return RecordingMigControl(dynamic_node(2))


@pytest.fixture
def start_dynamic(kubelet: MockKubelet, workdir: Path, control: RecordingMigControl) -> Iterator[StartDynamic]:
    started: list[DynamicPlugin] = []

    def start(count: int = 1, grace_s: float = 30.0, wait: bool = True) -> DynamicPlugin:
        plugin = DynamicPlugin(count, kubelet, control, workdir, grace_s).start()
        started.append(plugin)
        if wait:
            assert kubelet.wait_for(resource=SEVEN, registered=True, allocatable=count, timeout=WAIT_S)
        return plugin

    yield start
    for plugin in started:
        plugin.stop()


def eventually(check: Callable[[], bool], timeout_s: float = WAIT_S) -> bool:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def allocatable(kubelet: MockKubelet, resource: str, count: int) -> bool:
    return kubelet.wait_for(resource=resource, allocatable=count, timeout=WAIT_S)


def test_allocate_creates_blocks_overlaps_and_release_destroys(
    start_dynamic: StartDynamic, kubelet: MockKubelet, control: RecordingMigControl, workdir: Path
) -> None:
    plugin = start_dynamic()
    gpu = plugin.node.gpus[0]
    assert allocatable(kubelet, ONE, 7)
    allocation = kubelet.admit_one("big", THREE)
    held = slot_id(gpu.uuid, H100_80GB.profile("3g.40gb"), 0)
    assert allocation.device_ids == (held,)
    created = control.instances[0][(1, 0)]
    assert control.calls == [("create", 0, "3g.40gb", 0)]
    assert allocation.envs["NVIDIA_VISIBLE_DEVICES"] == created.uuid
    nodes = {path for path, _, _ in allocation.device_nodes}
    assert {
        f"/dev/nvidia-caps/nvidia-cap{created.gi_cap_minor}",
        f"/dev/nvidia-caps/nvidia-cap{created.ci_cap_minor}",
    } <= nodes
    # free counts fall by placement overlap: 1g.10gb 7 -> 3, the other 3g stays, 7g and 4g go
    assert allocatable(kubelet, ONE, 3)
    assert allocatable(kubelet, THREE, 2) and allocatable(kubelet, SEVEN, 0)
    assert kubelet.resource(ONE).capacity == 7  # type: ignore[union-attr]
    recorded = read_checkpoint(workdir / "mig-checkpoint", plugin.node.name)
    assert recorded is not None and [(h.slot_id, h.mig) for h in recorded] == [(held, created)]
    assert plugin.runtime.wait_until_listed()  # a pod deleted before its first listing waits out the grace
    assert kubelet.delete_pod("big")
    assert allocatable(kubelet, ONE, 7) and allocatable(kubelet, SEVEN, 1)
    assert control.calls == [("create", 0, "3g.40gb", 0), ("destroy", 0, 1, 0)]
    assert control.instances[0] == {}
    assert eventually(lambda: read_checkpoint(workdir / "mig-checkpoint", plugin.node.name) == ())


def test_blocked_placement_is_refused_with_the_reason(start_dynamic: StartDynamic, kubelet: MockKubelet) -> None:
    plugin = start_dynamic()
    gpu = plugin.node.gpus[0].uuid
    kubelet.admit_one("big", THREE)
    blocked = slot_id(gpu, H100_80GB.profile("2g.20gb"), 2)
    with PluginClient(plugin.socket("nvidia.com/mig-2g.20gb")) as client, pytest.raises(grpc.RpcError) as caught:
        client.stub.Allocate(allocate_request([blocked]), timeout=TIMEOUT_S)
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert f"{blocked} is not available: memory slices 0-3 are held by {gpu}/3g.40gb@0" in str(caught.value.details())


def test_sixteen_concurrent_clients_never_get_overlapping_slices(
    start_dynamic: StartDynamic, control: RecordingMigControl
) -> None:
    plugin = start_dynamic(count=2)
    by_resource = {r.name: [d.id for d in r.devices] for r in plugin.plan.resources}
    names = sorted(by_resource)
    won: list[str] = []
    failures: list[tuple[str, grpc.StatusCode]] = []
    lock = threading.Lock()
    go = threading.Barrier(16)

    def client(seed: int) -> None:
        rng = random.Random(seed)
        channels = {name: PluginClient(plugin.socket(name)) for name in names}
        try:
            go.wait()
            for _ in range(12):
                name = rng.choice(names)
                device = rng.choice(by_resource[name])
                try:
                    channels[name].stub.Allocate(allocate_request([device]), timeout=TIMEOUT_S)
                except grpc.RpcError as exc:
                    with lock:
                        failures.append((device, exc.code()))
                    continue
                with lock:
                    won.append(device)
        finally:
            for channel in channels.values():
                channel.close()

    threads = [threading.Thread(target=client, args=(seed,), name=f"test-client-{seed}") for seed in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    geometry = plugin.runtime.geometry
    slots = [geometry.slot(device) for device in won]
    assert len(won) == len(set(won)) == geometry.held_count > 0
    for i, a in enumerate(slots):
        for b in slots[i + 1 :]:
            assert a is not None and b is not None
            assert a.gpu.uuid != b.gpu.uuid or not a.mask & b.mask, f"{a.id} overlaps {b.id}"
    # every refusal came from the geometry (INVALID_ARGUMENT), none from the device refusing a placement
    assert failures and {code for _, code in failures} <= {grpc.StatusCode.INVALID_ARGUMENT}
    # nothing is released during the race, so every refusal must still be explained by a winner
    assert all(geometry.why_unavailable(device) is not None for device, _ in failures)
    assert sum(len(v) for v in control.instances.values()) == len(won)
    assert [c[0] for c in control.calls] == ["create"] * len(won)


def test_restart_resumes_the_same_geometry(
    start_dynamic: StartDynamic, kubelet: MockKubelet, control: RecordingMigControl
) -> None:
    first = start_dynamic()
    kubelet.admit_one("big", THREE)
    kubelet.admit_one("small", ONE)
    assert allocatable(kubelet, ONE, 3) and first.runtime.wait_until_listed()
    before = sorted(first.runtime.geometry.holdings(), key=lambda h: h.slot_id)
    first.stop()
    second = start_dynamic(wait=False)
    assert second.runtime.last_resume is not None and second.runtime.last_resume.source == "checkpoint"
    assert sorted(second.runtime.geometry.holdings(), key=lambda h: h.slot_id) == before
    assert kubelet.wait_for(resource=ONE, registered=True, allocatable=3, timeout=WAIT_S)
    assert allocatable(kubelet, SEVEN, 0)
    assert [c[0] for c in control.calls] == ["create", "create"]  # nothing re-created, nothing destroyed
    assert second.runtime.wait_until_listed()
    kubelet.delete_pod("small")
    assert allocatable(kubelet, ONE, 3)  # 1g.10gb@4 back; the 3g still blocks 0-3
    kubelet.delete_pod("big")
    assert allocatable(kubelet, ONE, 7)
    assert [c[0] for c in control.calls] == ["create", "create", "destroy", "destroy"]


def test_corrupt_checkpoint_is_reported_and_rebuilt_from_pod_resources(
    start_dynamic: StartDynamic,
    kubelet: MockKubelet,
    control: RecordingMigControl,
    workdir: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    first = start_dynamic()
    kubelet.admit_one("big", THREE)
    held = first.runtime.geometry.holdings()
    first.stop()
    checkpoint = workdir / "mig-checkpoint"
    checkpoint.write_text(checkpoint.read_text().replace('"start": 0', '"start": 4'))  # checksum now wrong
    with caplog.at_level(logging.ERROR, logger="gpuslice.plugin.dynamic_mig"):
        second = start_dynamic(wait=False)
    report = second.runtime.last_resume
    assert report is not None and report.source == "pod-resources"
    assert "checksum mismatch" in str(report.problem)
    assert any("cannot be trusted" in r.getMessage() and "checksum mismatch" in r.getMessage() for r in caplog.records)
    assert (workdir / ("mig-checkpoint" + CORRUPT_SUFFIX)).exists()
    rebuilt = second.runtime.geometry.holdings()
    assert [(h.slot_id, h.mig, h.seen) for h in rebuilt] == [(held[0].slot_id, held[0].mig, True)]
    assert kubelet.wait_for(resource=ONE, registered=True, allocatable=3, timeout=WAIT_S)
    recorded = read_checkpoint(checkpoint, second.node.name)
    assert recorded is not None and [h.slot_id for h in recorded] == [held[0].slot_id]
    assert second.runtime.wait_until_listed()
    kubelet.delete_pod("big")
    assert allocatable(kubelet, ONE, 7)
    assert control.calls == [("create", 0, "3g.40gb", 0), ("destroy", 0, 1, 0)]


def test_never_listed_allocation_is_freed_after_the_grace(
    start_dynamic: StartDynamic, kubelet: MockKubelet, control: RecordingMigControl
) -> None:
    plugin = start_dynamic(grace_s=0.3)
    device = slot_id(plugin.node.gpus[0].uuid, H100_80GB.profile("7g.80gb"), 0)
    with PluginClient(plugin.socket(SEVEN)) as client:  # an Allocate no pod ever follows
        client.stub.Allocate(allocate_request([device]), timeout=TIMEOUT_S)
    assert allocatable(kubelet, ONE, 0)
    assert allocatable(kubelet, ONE, 7)
    assert [c[0] for c in control.calls] == ["create", "destroy"]


class RefusingControl(RecordingMigControl):
    """The device refuses every create (e.g. MIG mode was turned off underneath us)."""

    def create(self, gpu_index: int, profile: str, start: int) -> MigInstance:
        self.calls.append(("create", gpu_index, profile, start))
        raise MigControlError(f"GPU {gpu_index}: MIG mode is not enabled on this GPU")


def test_device_refusal_fails_allocate_and_holds_nothing(kubelet: MockKubelet, workdir: Path) -> None:
    node = dynamic_node()
    plugin = DynamicPlugin(1, kubelet, RefusingControl(node), workdir, 30.0).start()
    try:
        device = slot_id(node.gpus[0].uuid, H100_80GB.profile("4g.40gb"), 0)
        with PluginClient(plugin.socket("nvidia.com/mig-4g.40gb")) as client, pytest.raises(grpc.RpcError) as caught:
            client.stub.Allocate(allocate_request([device]), timeout=TIMEOUT_S)
        assert caught.value.code() is grpc.StatusCode.INTERNAL
        assert "MIG mode is not enabled" in str(caught.value.details())
        assert plugin.runtime.geometry.held_count == 0
        assert read_checkpoint(workdir / "mig-checkpoint", node.name) == ()
    finally:
        plugin.stop()


def test_orphan_instances_are_destroyed_at_start(
    start_dynamic: StartDynamic, control: RecordingMigControl, kubelet: MockKubelet
) -> None:
    orphan = control.create(0, "2g.20gb", 2)  # made by a plugin that died before recording it
    plugin = start_dynamic()
    assert plugin.runtime.last_resume is not None and plugin.runtime.last_resume.orphans_destroyed == 1
    assert control.calls[-1] == ("destroy", 0, orphan.gi, orphan.ci)
    assert allocatable(kubelet, ONE, 7)


@pytest.mark.parametrize(
    ("flag", "env", "expected"),
    [
        ("/run/a.sock", {POD_RESOURCES_SOCKET_ENV: "/run/b.sock"}, "/run/a.sock"),
        (None, {POD_RESOURCES_SOCKET_ENV: "/run/b.sock"}, "/run/b.sock"),
        (None, {}, DEFAULT_POD_RESOURCES_SOCKET),
    ],
)
def test_pod_resources_socket_precedence(flag: str | None, env: dict[str, str], expected: str) -> None:
    assert str(pod_resources_socket(flag, env)) == expected


def _plugin_process(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return plugin_process(args, env, drop=(POD_RESOURCES_SOCKET_ENV,))


def _stop(process: subprocess.Popen[str]) -> str:
    code, err = finish(process, signal.SIGTERM, timeout=WAIT_S)
    assert code == 0, err
    return err


def test_cli_options_and_a_restart_of_the_process(kubelet: MockKubelet, workdir: Path) -> None:
    spec = workdir / "node.yaml"
    spec.write_text(f"name: cli-dyn\ngpus:\n  - {json.dumps({**H100, 'mig': []})}\n")
    config = workdir / "config.yaml"
    config.write_text("version: v1\nflags:\n  migStrategy: dynamic\n")
    common = ["--backend", "fake", "--node-spec", str(spec), "--config-file", str(config)]
    common += ["--kubelet-socket", str(kubelet.socket_path)]
    first = _plugin_process(common, {POD_RESOURCES_SOCKET_ENV: str(kubelet.pod_resources_socket)})
    try:
        assert all(allocatable(kubelet, name, count) for name, count in ((ONE, 7), (THREE, 2), (SEVEN, 1)))
        kubelet.admit_one("big", THREE)
        assert allocatable(kubelet, ONE, 3)
        checkpoint = kubelet.device_plugin_dir / "gpuslice_dynamic_mig_checkpoint"
        assert eventually(lambda: '"seen": true' in checkpoint.read_text())  # listed via the env's socket
    finally:
        _stop(first)
    second = _plugin_process([*common, "--pod-resources-socket", str(kubelet.pod_resources_socket)], {})
    try:
        assert kubelet.wait_for(resource=ONE, registered=True, allocatable=3, timeout=WAIT_S)  # same geometry
        kubelet.delete_pod("big")
        assert allocatable(kubelet, ONE, 7)
    finally:
        err = _stop(second)
    assert "resumed from checkpoint: 1 placements held" in err
    assert "is no longer in use (its pod is gone)" in err
