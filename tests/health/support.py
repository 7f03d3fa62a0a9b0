"""A whole plugin process in-thread (mock kubelet, manager, health loop, runtime) for lifecycle tests."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gpuslice.config import parse_config_text
from gpuslice.discovery import FakeBackend, load_node_spec
from gpuslice.gpu import Node
from gpuslice.health import xid_policy_from_env
from gpuslice.kubelet import MockKubelet, ResourceView
from gpuslice.plugin import PluginManager
from gpuslice.plugin.health_loop import HealthLoop, build_health_loop
from gpuslice.plugin.lifecycle import PluginRuntime
from gpuslice.plugin.metrics import PluginMetrics
from gpuslice.plugin.run import assemble_manager
from gpuslice.sharing import SharingPlan, build_resources
from gpuslice.wire import HEALTHY, UNHEALTHY

WAIT_S = 10.0
TIME_SLICED_4 = """
version: v1
sharing:
  timeSlicing:
    resources:
      - name: nvidia.com/gpu
        replicas: 4
"""
MIG_MIXED = """
version: v1
flags:
  migStrategy: mixed
"""


@dataclass
class Stack:
    kubelet: MockKubelet
    runtime: PluginRuntime
    manager: PluginManager
    health_loop: HealthLoop
    metrics: PluginMetrics
    plan: SharingPlan
    node: Node
    events: Path

    def write(self, *lines: str) -> None:
        """Append lines to the events file in one write, as an outside check would."""
        with self.events.open("a") as handle:
            handle.write("".join(line + "\n" for line in lines))

    def views(self) -> dict[str, ResourceView]:
        return self.kubelet.resources()

    def kubelet_health(self) -> dict[str, str]:
        """Device ID -> health over every resource, as the kubelet sees it now."""
        return {device: health for view in self.views().values() for device, health in view.devices.items()}

    def expected_health(self, unhealthy_physical: set[str]) -> dict[str, str]:
        """Device ID -> health when exactly these GPU/MIG UUIDs are marked."""
        return {
            device.id: UNHEALTHY if {device.gpu.uuid, device.physical_id} & unhealthy_physical else HEALTHY
            for resource in self.plan.resources
            for device in resource.devices
        }

    def wait_health(self, expected: Mapping[str, str], timeout: float = WAIT_S) -> bool:
        def matches(views: Mapping[str, ResourceView]) -> bool:
            seen = {device: health for view in views.values() for device, health in view.devices.items()}
            return seen == dict(expected)

        return self.kubelet.wait_for(matches, timeout=timeout)

    def wait_registered(self, min_registrations: int = 1) -> bool:
        return all(
            self.kubelet.wait_for(
                resource=r.name, min_registrations=min_registrations, allocatable=len(r.devices), timeout=WAIT_S
            )
            for r in self.plan.resources
        )


def start_stack(
    workdir: Path,
    preset: str = "h100x4",
    config: str = "",
    env: Mapping[str, str] | None = None,
    recovery: bool = False,
    metrics_port: int | None = None,
    kubelet: MockKubelet | None = None,
    wait: bool = True,
    start: bool = True,
) -> Stack:
    """Start a mock kubelet (unless given) and a plugin whose fake backend follows `<workdir>/events`."""
    events = workdir / "events"
    spec = dataclasses.replace(load_node_spec(f"preset:{preset}"), health_events=events)
    backend = FakeBackend(spec)
    node = spec.node
    loaded = parse_config_text(config).config
    plan = build_resources(node, loaded)
    if kubelet is None:
        kubelet = MockKubelet(workdir / "dp", dial_timeout_s=2.0, checkpoint_enabled=False).start()
    metrics = PluginMetrics()
    manager = assemble_manager(plan, node, loaded, kubelet.socket_path, spec.topology, workers=8, observer=metrics)
    loop = build_health_loop(backend, node, manager.health, xid_policy_from_env(env or {}), recovery, metrics, 0.005)
    runtime = PluginRuntime(manager, health_loop=loop, metrics=metrics, metrics_port=metrics_port)
    if start:
        runtime.start()
    stack = Stack(kubelet, runtime, manager, loop, metrics, plan, node, events)
    if start and wait:
        assert stack.wait_registered()
    return stack


def stop_stack(stack: Stack) -> None:
    stack.runtime.stop()
    stack.kubelet.stop()
