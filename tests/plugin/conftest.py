"""Fixtures: a mock kubelet in a short temp dir, our plugin (or a whole Stack) against it, and a thread-leak check."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpuslice.config import parse_config_text
from gpuslice.discovery import load_node_spec
from gpuslice.gpu import Node
from gpuslice.kubelet import MockKubelet
from gpuslice.plugin import PluginManager
from gpuslice.plugin.run import assemble_manager
from gpuslice.sharing import Resource, build_resources
from tests.health.support import Stack, stop_stack

OUR_THREAD_PREFIXES = ("gpuslice-", "kubelet-")
WAIT_S = 10.0
LEAK_GRACE_S = 2.0


def our_threads() -> list[str]:
    return sorted(t.name for t in threading.enumerate() if t.name.startswith(OUR_THREAD_PREFIXES))


@pytest.fixture(autouse=True)
def no_leaked_threads() -> Iterator[None]:
    """Fails the test that leaves one of our threads behind (not every later one)."""
    before = set(our_threads())
    yield
    deadline = time.monotonic() + LEAK_GRACE_S
    while (left := sorted(set(our_threads()) - before)) and time.monotonic() < deadline:
        time.sleep(0.02)  # a stopped executor's last worker may still be on its way out
    assert left == [], "threads left running after the test"


@pytest.fixture
def stacks(workdir: Path) -> Iterator[list[Stack]]:  # needs workdir so that it is stopped before the dir goes
    """Stacks (tests.health.support) a test started; each is stopped at the end."""
    started: list[Stack] = []
    yield started
    for stack in started:
        stop_stack(stack)


@pytest.fixture
def kubelet(workdir: Path) -> Iterator[MockKubelet]:
    with MockKubelet(workdir, dial_timeout_s=2.0, checkpoint_enabled=False) as running:
        yield running


@dataclass
class RunningPlugin:
    manager: PluginManager
    node: Node
    resources: tuple[Resource, ...]

    @property
    def resource(self) -> Resource:
        assert len(self.resources) == 1
        return self.resources[0]


StartPlugin = Callable[..., RunningPlugin]


@pytest.fixture
def start_plugin(kubelet: MockKubelet) -> Iterator[StartPlugin]:
    """start_plugin(preset, config_yaml) -> RunningPlugin, registered and listed by the kubelet."""
    started: list[PluginManager] = []

    def start(preset: str = "h100x4", config: str = "", wait: bool = True) -> RunningPlugin:
        spec = load_node_spec(f"preset:{preset}")
        node = spec.node
        loaded = parse_config_text(config).config
        plan = build_resources(node, loaded)
        manager = assemble_manager(plan, node, loaded, kubelet.socket_path, spec.topology, workers=8)
        started.append(manager)
        manager.start()
        if wait:
            for resource in plan.resources:
                assert kubelet.wait_for(resource=resource.name, allocatable=len(resource.devices), timeout=WAIT_S)
        return RunningPlugin(manager, node, plan.resources)

    yield start
    for manager in started:
        manager.stop()
