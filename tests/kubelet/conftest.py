"""Fixtures: a running mock kubelet in a short temp dir, fake plugins beside it, and a thread-leak check."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from gpuslice.kubelet import MockKubelet
from tests.kubelet.fake_plugin import FakeDevicePlugin

OUR_THREAD_PREFIXES = ("kubelet-", "fake-plugin")
MakePlugin = Callable[..., FakeDevicePlugin]


def our_threads() -> list[str]:
    return sorted(t.name for t in threading.enumerate() if t.name.startswith(OUR_THREAD_PREFIXES))


@pytest.fixture(autouse=True)
def no_leaked_threads() -> Iterator[None]:
    yield
    assert our_threads() == [], "threads left running after the test"


@pytest.fixture
def kubelet(workdir: Path) -> Iterator[MockKubelet]:
    with MockKubelet(workdir / "device-plugins", dial_timeout_s=2.0) as running:
        yield running


@pytest.fixture
def make_plugin(kubelet: MockKubelet) -> Iterator[MakePlugin]:
    plugins: list[FakeDevicePlugin] = []

    def make(
        socket_name: str = "fake.sock", devices: Mapping[str, str] | Sequence[str] = ("d0", "d1", "d2", "d3"), **kw: Any
    ) -> FakeDevicePlugin:
        plugin = FakeDevicePlugin(kubelet.device_plugin_dir, socket_name, devices, **kw).start()
        plugins.append(plugin)
        return plugin

    yield make
    for plugin in plugins:
        plugin.stop()


def register(kubelet: MockKubelet, plugin: FakeDevicePlugin, resource: str = "example.com/fake") -> None:
    """Register and wait until the first ListAndWatch message has arrived."""
    view = kubelet.resource(resource)
    registrations, updates = (view.registrations, view.updates) if view is not None else (0, 0)
    plugin.register(kubelet.socket_path, resource)
    assert kubelet.wait_for(
        resource=resource, registered=True, min_registrations=registrations + 1, min_updates=updates + 1
    )
