"""Against a 1.35+ API server (no slice with both counters and devices) the plugin splits them, and MIG still fits."""

from __future__ import annotations

import pytest

from gpuslice.dra import DraApp, DraSettings, prepare_setup
from gpuslice.dra.kube import LightkubeResourceApi
from gpuslice.kubelet.dra_mock import DraAdmissionError, MockDraKubelet
from gpuslice.mps import FakeMpsControl
from tests.dra.support import DRIVER, MIG_CLASS, NODE, Node, claim, device_classes
from tests.support.dirs import short_temp_dir

BIG = ["device.attributes['gpu.gpuslice.io'].profile == '3g.40gb'", "device.attributes['gpu.gpuslice.io'].index == 3"]


def test_counter_sets_move_to_their_own_slice_when_the_server_asks() -> None:
    with short_temp_dir("gs") as root, MockDraKubelet(root, NODE, counters_apart=True) as kubelet:
        node = Node(root)
        for device_class in device_classes():
            kubelet.add_device_class(device_class)
        setup = prepare_setup("fake", str(node.spec), str(node.config))
        settings = DraSettings(registry_dir=kubelet.registry_dir, plugins_dir=kubelet.plugins_dir, cdi_dir=node.cdi)
        app = DraApp(setup, settings, LightkubeResourceApi(kubelet.api_url), mps_control=FakeMpsControl())
        app.start()
        try:
            assert kubelet.watcher.wait_registered(DRIVER, timeout=10)
            assert kubelet.wait_for_slices(DRIVER, min_devices=30)
            assert app.plugin.slices is not None and app.plugin.slices.wait_synced(10)  # its own thread
            slices = kubelet.slices(DRIVER)
            assert any(s["spec"].get("sharedCounters") and not s["spec"].get("devices") for s in slices)
            for name in ("big-1", "big-2", "big-3"):
                kubelet.create_claim(claim(name, MIG_CLASS, BIG))
            kubelet.admit("pod-1", ["big-1"])
            kubelet.admit("pod-2", ["big-2"])
            with pytest.raises(DraAdmissionError, match="does not fit"):
                kubelet.admit("pod-3", ["big-3"])
            assert kubelet.delete_pod("pod-1") == {} and kubelet.delete_pod("pod-2") == {}
        finally:
            app.stop()
