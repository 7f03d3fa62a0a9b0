"""A whole plugin process in-thread (mock kubelet, manager, health loop, runtime) for lifecycle tests."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gpuslice.gpu import Node
from gpuslice.health.loop import HealthLoop
from gpuslice.kubelet import MockKubelet, ResourceView
from gpuslice.plugin import PluginManager
from gpuslice.plugin.app import PluginApp
from gpuslice.plugin.lifecycle import PluginRuntime
from gpuslice.plugin.metrics import PluginMetrics
from gpuslice.sharing import SharingPlan
from gpuslice.wire import HEALTHY, UNHEALTHY
from tests.support.plugin import build_app, fake_backend

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
    app: PluginApp
    events: Path

    @property
    def runtime(self) -> PluginRuntime:
        return self.app.runtime

    @property
    def manager(self) -> PluginManager:
        return self.app.manager

    @property
    def health_loop(self) -> HealthLoop:
        assert self.app.runtime.health_loop is not None
        return self.app.runtime.health_loop

    @property
    def metrics(self) -> PluginMetrics:
        return self.app.metrics

    @property
    def plan(self) -> SharingPlan:
        return self.app.plan

    @property
    def node(self) -> Node:
        return self.app.node

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
    if kubelet is None:
        kubelet = MockKubelet(workdir / "dp", dial_timeout_s=2.0, checkpoint_enabled=False).start()
    recovery_config = "gpuslice: {healthRecovery: true}\n" if recovery else ""
    app = build_app(
        workdir,
        config + ("\n" if config else "") + recovery_config,
        kubelet,
        backend=fake_backend(f"preset:{preset}", health_events=events),
        environ=dict(env or {}),
        metrics_port=metrics_port,
        health_poll_s=0.005,
    )
    stack = Stack(kubelet, app, events)
    if start:
        app.start()
    if start and wait:
        assert stack.wait_registered()
    return stack


def stop_stack(stack: Stack) -> None:
    stack.app.stop()
    stack.kubelet.stop()
