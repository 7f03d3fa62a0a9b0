"""A server that drops shared counters (1.32; 1.33/1.34 without the gate) is offered no overlapping placements."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from prometheus_client import generate_latest

from gpuslice.dra import DraApp, DraSettings, prepare_setup
from gpuslice.dra.api import InMemoryResourceApi
from gpuslice.dra.counters import CounterSupport, counters_dropped, guarded_devices
from gpuslice.dra.devices import DraDevice
from gpuslice.dra.kube import LightkubeResourceApi
from gpuslice.dra.slices import PoolSpec, build_slices, devices_of
from gpuslice.gpu import MigInstance
from gpuslice.kubelet.dra_mock import DraAdmissionError, MockDraKubelet
from gpuslice.mps import FakeMpsControl
from gpuslice.sharing.dynamic import Slot
from tests.dra.support import DRIVER, MIG_CLASS, NODE, Node, claim, device_classes
from tests.support.dirs import short_temp_dir

GPU3 = "device.attributes['gpu.gpuslice.io'].index == 3"


def _profile(name: str) -> list[str]:
    return [f"device.attributes['gpu.gpuslice.io'].profile == '{name}'", GPU3]


def _slots(obj: dict[str, Any]) -> list[tuple[str, int, int, int]]:
    """(GPU uuid, first memory slice, slice count, MiB) of each MIG device of a slice, from its name and capacity."""
    found = []
    for device in devices_of(obj):
        attributes = device["attributes"]
        if attributes["type"]["string"] != "mig" or "uuid" in attributes:
            continue
        start = int(device["name"].rsplit("-", 1)[1])
        size = int(attributes["profile"]["string"].split("g.")[1].split("gb")[0]) // 10 or 1
        memory = int(device["capacity"]["memory"]["value"].removesuffix("Mi"))
        found.append((attributes["parentUUID"]["string"], start, size, memory))
    return found


def _assert_no_overlap(slices: list[dict[str, Any]], gpu_mib: int) -> None:
    by_gpu: dict[str, list[tuple[int, int, int]]] = {}
    for obj in slices:
        assert not obj["spec"].get("sharedCounters")
        assert not any(device.get("consumesCounters") for device in devices_of(obj))
        for uuid, start, size, memory in _slots(obj):
            by_gpu.setdefault(uuid, []).append((start, size, memory))
    assert by_gpu, "the dynamic GPU is still offered"
    for placements in by_gpu.values():
        used = 0
        for start, size, _ in placements:
            mask = ((1 << size) - 1) << start
            assert not used & mask, f"overlapping placements offered: {placements}"
            used |= mask
        assert sum(memory for _, _, memory in placements) <= gpu_mib


@pytest.fixture(params=[("v1beta1",), ("v1beta2",), ("v1",)], ids=["1.32", "1.33-gate-off", "1.34-gate-off"])
def kubelet(request: pytest.FixtureRequest) -> Iterator[tuple[Node, MockDraKubelet]]:
    with (
        short_temp_dir("gs") as root,
        MockDraKubelet(root, NODE, served_versions=request.param, drop_counters=True) as k,
    ):
        for device_class in device_classes():
            k.add_device_class(device_class)
        yield Node(root), k


def test_no_overlapping_placements_are_offered_when_the_server_drops_counters(
    kubelet: tuple[Node, MockDraKubelet],
) -> None:
    node, mock = kubelet
    setup = prepare_setup("fake", str(node.spec), str(node.config))
    settings = DraSettings(registry_dir=mock.registry_dir, plugins_dir=mock.plugins_dir, cdi_dir=node.cdi)
    app = DraApp(setup, settings, LightkubeResourceApi(mock.api_url), mps_control=FakeMpsControl())
    app.start()
    try:
        assert mock.watcher.wait_registered(DRIVER, timeout=10)
        assert mock.wait_for_slices(DRIVER, min_devices=4)
        assert app.plugin.slices is not None and app.plugin.slices.wait_synced(10)  # its own thread
        assert app.plugin.slices is not None and app.plugin.slices.counters.dropped
        _assert_no_overlap(mock.slices(DRIVER), 81559)
        # The claims the real allocator put all on GPU 0 of a 1.32 server: only the first fits now.
        for name, profile in (("full", "7g.80gb"), ("small", "1g.10gb"), ("half", "3g.40gb")):
            mock.create_claim(claim(name, MIG_CLASS, _profile(profile)))
        mock.admit("pod-full", ["full"])
        for pod, name in (("pod-small", "small"), ("pod-half", "half")):
            with pytest.raises(DraAdmissionError, match="does not fit"):
                mock.admit(pod, [name])
        metrics = generate_latest(app.plugin.slices.counters.registry).decode()
        assert 'gpuslice_dra_shared_counters{state="dropped"} 1.0' in metrics
        assert "gpuslice_dra_guarded_gpus 1.0" in metrics
        publishes = app.plugin.slices.publishes
        app.plugin.slices.sync()
        assert app.plugin.slices.publishes == publishes, "the guarded layout is stable: nothing to rewrite"
        assert mock.delete_pod("pod-full") == {}
    finally:
        app.stop()


def test_a_server_that_keeps_counters_gets_every_placement() -> None:
    with short_temp_dir("gs") as root, MockDraKubelet(root, NODE, served_versions=("v1",)) as mock:
        node = Node(root)
        setup = prepare_setup("fake", str(node.spec), str(node.config))
        settings = DraSettings(registry_dir=mock.registry_dir, plugins_dir=mock.plugins_dir, cdi_dir=node.cdi)
        app = DraApp(setup, settings, LightkubeResourceApi(mock.api_url), mps_control=FakeMpsControl())
        app.start()
        try:
            assert mock.wait_for_slices(DRIVER, min_devices=30)
            assert app.plugin.slices is not None and app.plugin.slices.wait_synced(10)  # its own thread
            assert app.plugin.slices is not None and app.plugin.slices.counters.state == "supported"
            assert any(obj["spec"].get("sharedCounters") for obj in mock.slices(DRIVER))
            assert not any(name.endswith("counter-probe") for name in (s["metadata"]["name"] for s in mock.slices()))
        finally:
            app.stop()


def _dynamic_setup(tmp: Node) -> Any:
    return prepare_setup("fake", str(tmp.spec), str(tmp.config))


def _at(device: DraDevice) -> Slot:
    assert device.placement is not None
    return device.placement


def test_the_guarded_layout_is_the_current_mig_layout_when_the_gpu_has_one() -> None:
    with short_temp_dir("gs") as root:
        setup = _dynamic_setup(Node(root))
    placements = [device for device in setup.devices if device.placement is not None]
    gpu = placements[0].gpu
    current = {("3g.40gb", 4), ("1g.10gb", 0)}
    wanted = [d for d in placements if (_at(d).profile.name, _at(d).start) in current]
    assert len(wanted) == 2
    instances = tuple(
        MigInstance(
            uuid=f"MIG-{n}", parent_uuid=gpu.uuid, profile=_at(d).profile.name, parent_index=gpu.index, index=n,
            gi=n, ci=0, placement_start=_at(d).start, placement_size=_at(d).profile.memory_slices,
            memory_mib=10000, gi_cap_minor=n, ci_cap_minor=n,
        )
        for n, d in enumerate(wanted)
    )  # fmt: skip
    held = replace(gpu, mig_instances=instances)
    devices = [replace(d, advertised=replace(d.advertised, gpu=held)) if d.placement else d for d in setup.devices]
    guarded = guarded_devices(devices)
    assert {d.name for d in guarded if d.placement is not None} == {d.name for d in wanted}
    assert all(not d.consumes and d.counter_set is None for d in guarded)
    # without a current layout: the whole GPU as its one full placement
    whole = [d for d in guarded_devices(list(setup.devices)) if d.placement is not None]
    assert [_at(d).profile.name for d in whole] == ["7g.80gb"]
    plain = [d.name for d in setup.devices if d.placement is None]
    assert [d.name for d in guarded if d.placement is None] == plain


def test_counters_dropped_is_judged_by_name_and_field() -> None:
    with short_temp_dir("gs") as root:
        setup = _dynamic_setup(Node(root))
    written = build_slices(PoolSpec(DRIVER, NODE), setup.devices, 1)
    assert not counters_dropped(written, written)
    stripped = [{**obj, "spec": {k: v for k, v in obj["spec"].items() if k != "sharedCounters"}} for obj in written]
    assert counters_dropped(written, stripped)
    assert not counters_dropped(written, []), "a slice that is gone (a kubelet wipe) proves nothing"


def test_the_probe_decides_before_any_placement_is_published() -> None:
    class Dropping(InMemoryResourceApi):
        def apply_slice(self, obj: dict[str, Any]) -> None:
            obj = {**obj, "spec": {k: v for k, v in obj["spec"].items() if k != "sharedCounters"}}
            super().apply_slice(obj)

    with short_temp_dir("gs") as root:
        setup = _dynamic_setup(Node(root))
    api = Dropping(served=("v1beta1",))
    support = CounterSupport()
    support.probe(api, PoolSpec(DRIVER, NODE, "v1beta1"), setup.devices)
    assert support.dropped and api.slices == {}, "the probe slice is deleted again"
    kept = CounterSupport()
    kept.probe(InMemoryResourceApi(), PoolSpec(DRIVER, NODE), setup.devices)
    assert kept.state == "supported"
