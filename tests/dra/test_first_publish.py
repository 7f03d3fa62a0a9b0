"""The first publish waits for the kubelet's registration (a poke), at most its bound, so that loading the API
client does not take the CPU from the registration handshake; a stop during that wait ends the thread."""

from __future__ import annotations

import pytest

from gpuslice.dra import DraApp, DraSettings, PoolSpec, prepare_setup
from gpuslice.dra.api import InMemoryResourceApi
from gpuslice.dra.publish import SliceController
from gpuslice.kubelet.dra_mock import MockDraKubelet
from gpuslice.mps import FakeMpsControl
from tests.dra.support import DRIVER, NODE, Node
from tests.support.dirs import short_temp_dir

WAIT_S = 20.0
NEVER_S = 3600.0  # a first wait no test outlives: only a poke (or a stop) can end it


def _controller(api: InMemoryResourceApi) -> SliceController:
    return SliceController(api, PoolSpec(DRIVER, NODE), lambda: (), resync_s=3600)


def test_the_first_sync_waits_for_a_poke() -> None:
    api = InMemoryResourceApi()
    slices = _controller(api)
    slices.start(NEVER_S)
    try:
        assert slices.alive
        assert not slices.wait_synced(0.2)  # nothing pokes it: no sync however long it is given
        slices.poke()
        assert slices.wait_synced(WAIT_S)
    finally:
        slices.stop()


def test_without_a_first_wait_the_first_sync_is_at_once() -> None:
    api = InMemoryResourceApi()
    slices = _controller(api)
    slices.start()  # what a restarted publisher gets
    try:
        assert slices.wait_synced(WAIT_S)
    finally:
        slices.stop()


def test_a_stop_ends_the_first_wait() -> None:
    slices = _controller(InMemoryResourceApi())
    slices.start(NEVER_S)
    thread = slices._thread
    assert thread is not None
    slices.stop()
    thread.join(WAIT_S)
    assert not thread.is_alive() and not slices.wait_synced(0)


def test_the_kubelets_registration_starts_the_first_publish(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing but the registration's poke can end a first wait this long, so the slices prove it came."""
    monkeypatch.setattr("gpuslice.dra.kubelet_plugin.FIRST_PUBLISH_WAIT_S", NEVER_S)
    with short_temp_dir("gs") as root, MockDraKubelet(root, NODE) as kubelet:
        node = Node(root)
        setup = prepare_setup("fake", str(node.spec), str(node.config))
        settings = DraSettings(registry_dir=kubelet.registry_dir, plugins_dir=kubelet.plugins_dir, cdi_dir=node.cdi)
        api = InMemoryResourceApi()
        app = DraApp(setup, settings, api, mps_control=FakeMpsControl())
        app.start()
        try:
            assert kubelet.watcher.wait_registered(DRIVER, timeout=WAIT_S)
            assert app.plugin.slices is not None and app.plugin.slices.wait_synced(WAIT_S)
            assert api.slices
        finally:
            app.stop()
