"""Fixtures: a mock kubelet in a short temp dir, our plugin (or a whole Stack) against it, and a thread-leak check."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpuslice.gpu import Node
from gpuslice.kubelet import MockKubelet
from gpuslice.plugin import PluginManager
from gpuslice.plugin.app import PluginApp
from gpuslice.sharing import Resource
from tests.support.plugin import build_app, wait_listed
from tests.support.stack import Stack, stop_stack

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
    """Stacks (tests.support.stack) a test started; each is stopped at the end."""
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
    app: PluginApp

    @property
    def manager(self) -> PluginManager:
        return self.app.manager

    @property
    def node(self) -> Node:
        return self.app.node

    @property
    def resources(self) -> tuple[Resource, ...]:
        return self.app.plan.resources

    @property
    def resource(self) -> Resource:
        assert len(self.resources) == 1
        return self.resources[0]


StartPlugin = Callable[..., RunningPlugin]


@pytest.fixture
def start_plugin(kubelet: MockKubelet, workdir: Path) -> Iterator[StartPlugin]:
    """start_plugin(preset, config_yaml) -> RunningPlugin, registered and listed by the kubelet.

    Only the app's servers run: these tests drive kubelet restarts and health by hand, so the kubelet
    watcher and the health loop (start_stack runs the whole app) would race them.
    """
    started: list[PluginApp] = []

    def start(preset: str = "h100x4", config: str = "", wait: bool = True) -> RunningPlugin:
        app = build_app(workdir, config, kubelet, backend=f"preset:{preset}")
        started.append(app)
        app.manager.start()
        if wait:
            assert wait_listed(app, kubelet)
        return RunningPlugin(app)

    yield start
    for app in started:
        app.stop()
