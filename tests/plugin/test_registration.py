"""Registration: kubelet-side validation errors surface, nothing is left behind, re-registration works."""

from __future__ import annotations

import socket
from dataclasses import replace
from pathlib import Path

import pytest

from gpuslice.allocation import StaticAllocator
from gpuslice.config import Config, parse_config_text
from gpuslice.discovery import load_node_spec, parse_node_spec
from gpuslice.kubelet import MockKubelet
from gpuslice.plugin import PluginManager, PluginStartError, RegistrationError, socket_name
from gpuslice.sharing import HealthStore, build_resources
from tests.plugin.conftest import WAIT_S, StartPlugin


def _manager(socket: Path, name: str | None = None, socket_dir: Path | None = None) -> PluginManager:
    node = load_node_spec(None).node
    resource = build_resources(node, Config()).resources[0]
    if name is not None:
        resource = replace(resource, name=name)
    return PluginManager([resource], HealthStore(node), socket, socket_dir=socket_dir, workers=4)


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("gpu", 'the ResourceName "gpu" is invalid'),
        ("kubernetes.io/gpu", 'the ResourceName "kubernetes.io/gpu" is invalid'),
    ],
)
def test_kubelet_refusal_surfaces_with_its_text(kubelet: MockKubelet, name: str, text: str) -> None:
    manager = _manager(kubelet.socket_path, name)
    with pytest.raises(RegistrationError) as caught:
        manager.start()
    assert text in str(caught.value) and name in str(caught.value)
    assert not manager.running
    assert [p.name for p in kubelet.device_plugin_dir.glob("gpuslice-*")] == [], "no socket left behind"


def test_absent_kubelet_is_a_clear_error(workdir: Path) -> None:
    manager = _manager(workdir / "kubelet.sock")
    with pytest.raises(RegistrationError, match=r"registration with the kubelet at .*kubelet\.sock failed"):
        manager.start()
    assert list(workdir.iterdir()) == []


def test_serving_without_a_kubelet(workdir: Path) -> None:
    with _manager(None, socket_dir=workdir) as manager:  # type: ignore[arg-type]
        assert [p.name for p in workdir.iterdir()] == ["gpuslice-nvidia.com-gpu.sock"]
        assert manager.socket_paths == (workdir / "gpuslice-nvidia.com-gpu.sock",)
    assert list(workdir.iterdir()) == []


def test_a_socket_path_too_long_is_refused(workdir: Path) -> None:
    deep = workdir / ("d" * 100)
    with pytest.raises(PluginStartError, match="longer than 107 bytes"):
        _manager(None, socket_dir=deep).start()  # type: ignore[arg-type]


def test_a_stale_socket_is_replaced_and_ours_removed_on_stop(kubelet: MockKubelet, start_plugin: StartPlugin) -> None:
    stale = kubelet.device_plugin_dir / "gpuslice-nvidia.com-gpu.sock"
    leftover = socket.socket(socket.AF_UNIX)
    leftover.bind(str(stale))
    leftover.close()
    plugin = start_plugin()
    assert stale.is_socket()
    plugin.manager.stop()
    assert not stale.exists()


def test_reregister_after_a_kubelet_restart(kubelet: MockKubelet, start_plugin: StartPlugin) -> None:
    plugin = start_plugin()
    kubelet.restart()
    assert kubelet.wait_for(resource="nvidia.com/gpu", registered=False, capacity=0, timeout=WAIT_S)
    assert not plugin.manager.socket_paths[0].exists(), "the kubelet wiped our socket"
    plugin.manager.reregister()
    assert kubelet.wait_for(
        resource="nvidia.com/gpu", registered=True, allocatable=4, min_registrations=2, timeout=WAIT_S
    )
    assert kubelet.admit_one("after-restart", "nvidia.com/gpu").device_ids


def test_one_server_and_socket_per_resource(kubelet: MockKubelet) -> None:
    h100 = {"model": "NVIDIA H100 80GB HBM3", "memory_mib": 81559, "compute_capability": "9.0"}
    spec = {"name": "mixed", "gpus": [{**h100, "mig": ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]}, h100]}
    node = parse_node_spec(spec).node
    plan = build_resources(node, parse_config_text("flags: {migStrategy: mixed}").config)
    expected = {
        "nvidia.com/gpu": 1,
        "nvidia.com/mig-1g.10gb": 2,
        "nvidia.com/mig-2g.20gb": 1,
        "nvidia.com/mig-3g.40gb": 1,
    }
    assert dict(zip(plan.names, (len(r.devices) for r in plan.resources), strict=True)) == expected
    with PluginManager(plan.resources, HealthStore(node), kubelet.socket_path, workers=4) as manager:
        for name, count in expected.items():
            assert kubelet.wait_for(resource=name, allocatable=count, timeout=WAIT_S)
            view = kubelet.resource(name)
            assert view is not None and view.endpoint == socket_name(name)
        assert sorted(p.name for p in kubelet.device_plugin_dir.glob("gpuslice-*")) == sorted(
            socket_name(n) for n in expected
        )
        manager.set_health(node.gpus[0].uuid, healthy=False)
        for name in expected:
            if name.startswith("nvidia.com/mig-"):
                assert kubelet.wait_for(resource=name, allocatable=0, timeout=WAIT_S)
        assert kubelet.resource("nvidia.com/gpu").allocatable == 1  # type: ignore[union-attr]
    assert list(kubelet.device_plugin_dir.glob("gpuslice-*")) == []


class RecordingExtension:
    """A plugin extension that records its lifecycle and builds the allocators of the resources it names."""

    def __init__(self, name: str, kubelet: MockKubelet, calls: list[str], serves: tuple[str, ...]) -> None:
        self.name = name
        self.kubelet = kubelet
        self.calls = calls
        self.serves = serves

    def _sockets(self) -> int:
        return len(list(self.kubelet.device_plugin_dir.glob("gpuslice-*")))

    def start(self) -> None:
        self.calls.append(f"{self.name} start, sockets: {self._sockets()}")

    def stop(self) -> None:
        self.calls.append(f"{self.name} stop, sockets: {self._sockets()}")

    def allocator_for(self, resource, health, options=None, whole_gpu_rule=None):  # type: ignore[no-untyped-def]
        if resource.name not in self.serves:
            return None
        self.calls.append(f"{self.name} builds {resource.name}")
        return StaticAllocator(resource, health, options, whole_gpu_rule)


def test_extensions_wrap_the_servers_and_the_first_that_serves_a_resource_builds_it(kubelet: MockKubelet) -> None:
    h100 = {"model": "NVIDIA H100 80GB HBM3", "memory_mib": 81559, "compute_capability": "9.0"}
    node = parse_node_spec({"name": "ext", "gpus": [{**h100, "mig": ["3g.40gb", "3g.40gb"]}, h100]}).node
    resources = build_resources(node, parse_config_text("flags: {migStrategy: mixed}").config).resources
    assert [r.name for r in resources] == ["nvidia.com/gpu", "nvidia.com/mig-3g.40gb"]
    calls: list[str] = []
    extensions = [
        RecordingExtension("first", kubelet, calls, ("nvidia.com/mig-3g.40gb",)),
        RecordingExtension("second", kubelet, calls, ("nvidia.com/mig-3g.40gb", "nvidia.com/gpu")),
    ]
    manager = PluginManager(resources, HealthStore(node), kubelet.socket_path, extensions=extensions)
    with manager:
        assert kubelet.wait_for(resource="nvidia.com/gpu", allocatable=1, timeout=WAIT_S)
        kubelet.restart()
        manager.reregister()
        assert kubelet.wait_for(resource="nvidia.com/gpu", allocatable=1, min_registrations=2, timeout=WAIT_S)
    built = ["second builds nvidia.com/gpu", "first builds nvidia.com/mig-3g.40gb"]
    assert calls == [
        "first start, sockets: 0",
        "second start, sockets: 0",
        *built,
        *built,  # the kubelet restart: fresh servers, the extensions keep running
        "second stop, sockets: 0",
        "first stop, sockets: 0",
    ]


def test_without_an_extension_serving_it_a_resource_gets_the_managers_factory(workdir: Path) -> None:
    node = load_node_spec(None).node
    built: list[str] = []

    def factory(resource, health, options, rule):  # type: ignore[no-untyped-def]
        built.append(resource.name)
        return StaticAllocator(resource, health, options, rule)

    resources = build_resources(node, Config()).resources
    with PluginManager(resources, HealthStore(node), None, socket_dir=workdir, allocator_factory=factory) as manager:
        assert [type(s.service.allocator) for s in manager.servers] == [StaticAllocator]
    assert built == ["nvidia.com/gpu"]
