"""Restarts: the kubelet's (re-registration, slices re-published) and the plugin's (SIGKILL with claims prepared)."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import grpc
import pytest

from gpuslice.kubelet.dra_mock import MockDraKubelet
from gpuslice.wire import drahealth_grpc, drahealth_pb2
from tests.dra.support import DRIVER, MIG_CLASS, NODE, Node, claim, device_classes, start_plugin
from tests.support.dirs import short_temp_dir
from tests.support.process import finish, reap

DYNAMIC_3G = [
    "device.attributes['gpu.gpuslice.io'].profile == '3g.40gb'",
    "device.attributes['gpu.gpuslice.io'].index == 3",
]


@pytest.fixture
def setup() -> Iterator[tuple[Node, MockDraKubelet]]:
    with short_temp_dir("gs") as root:
        kubelet = MockDraKubelet(root, NODE).start()
        for device_class in device_classes():
            kubelet.add_device_class(device_class)
        try:
            yield Node(root), kubelet
        finally:
            kubelet.stop()


def _generation(kubelet: MockDraKubelet) -> int:
    return max(s["spec"]["pool"]["generation"] for s in kubelet.slices(DRIVER))


def test_kubelet_restart_re_registers_and_re_publishes(setup: tuple[Node, MockDraKubelet]) -> None:
    node, kubelet = setup
    process = start_plugin(node, kubelet)
    try:
        assert kubelet.watcher.wait_registered(DRIVER, timeout=20)
        assert kubelet.wait_for_slices(DRIVER, min_devices=30)
        kubelet.create_claim(claim("before"))
        before = kubelet.admit("pod-before", ["before"])
        generation = _generation(kubelet)
        kubelet.restart()
        assert kubelet.slices(DRIVER) == [], "a starting kubelet wipes the node's slices"
        assert kubelet.watcher.wait_registered(DRIVER, timeout=10)
        assert kubelet.wait_for_slices(DRIVER, min_devices=30, timeout=10)
        assert _generation(kubelet) > generation
        assert kubelet.reprepare_running_pods() == before.claims, "the same devices and CDI IDs as before"
        kubelet.create_claim(claim("after"))
        after = kubelet.admit("pod-after", ["after"])
        assert set(before.cdi_ids).isdisjoint(after.cdi_ids)
        assert kubelet.delete_pod("pod-before") == {} and kubelet.delete_pod("pod-after") == {}
        code, err = finish(process, signal.SIGTERM)
        assert code == 0, err[-2000:]
        assert kubelet.slices(DRIVER) == [], "a clean shutdown deletes our slices"
        assert not (kubelet.registry_dir / f"{DRIVER}-reg.sock").exists()
        assert not (kubelet.plugins_dir / DRIVER / "dra.sock").exists()
    finally:
        reap(process)


def test_sigkill_with_claims_prepared_neither_loses_nor_repeats_work(setup: tuple[Node, MockDraKubelet]) -> None:
    node, kubelet = setup
    process = start_plugin(node, kubelet)
    try:
        assert kubelet.watcher.wait_registered(DRIVER, timeout=20)
        assert kubelet.wait_for_slices(DRIVER, min_devices=30)
        uid = kubelet.create_claim(claim("held", MIG_CLASS, DYNAMIC_3G))["metadata"]["uid"]
        first = kubelet.admit("pod-held", ["held"])
        (created,) = node.checkpoint()["claims"][uid]["migs"]
        process.kill()
        process.wait(timeout=10)
        registrations = kubelet.watcher.registrations
        process = start_plugin(node, kubelet)
        assert kubelet.watcher.wait_registered(DRIVER, timeout=20, min_registrations=registrations + 1)
        plugin = kubelet.watcher.plugin(DRIVER)
        assert plugin is not None
        pb = plugin.pb
        request = pb.NodePrepareResourcesRequest(claims=[pb.Claim(namespace="default", uid=uid, name="held")])
        again = plugin.stub().NodePrepareResources(request, timeout=20).claims[uid]
        assert again.error == ""
        assert tuple(cdi for d in again.devices for cdi in d.cdi_device_ids) == first.cdi_ids
        record = node.checkpoint()["claims"][uid]
        assert record["state"] == "PrepareCompleted"
        assert [(m["gpu_index"], m["start"], m["profile"]) for m in record["migs"]] == [
            (created["gpu_index"], created["start"], created["profile"])
        ]
        assert node.spec_file(uid).exists()
        assert kubelet.delete_pod("pod-held") == {}
        assert not node.spec_file(uid).exists()
        assert uid not in node.checkpoint()["claims"]
    finally:
        reap(process)


def test_an_xid_takes_the_gpu_out_of_the_pool(setup: tuple[Node, MockDraKubelet]) -> None:
    _, kubelet = setup
    node = Node(kubelet.root, health_events=True)
    process = start_plugin(node, kubelet)
    try:
        assert kubelet.watcher.wait_registered(DRIVER, timeout=20)
        assert kubelet.wait_for_slices(DRIVER, min_devices=30)
        devices = {d["name"]: d for s in kubelet.slices(DRIVER) for d in s["spec"]["devices"]}
        generation = _generation(kubelet)
        with node.events.open("a") as events:
            events.write(f"{devices['gpu-0']['attributes']['uuid']['string']} 79\n")

        def gone() -> bool:
            names = {d["name"] for s in kubelet.slices(DRIVER) for d in s["spec"]["devices"]}
            return bool(names) and "gpu-0" not in names and "gpu-1" in names

        assert kubelet.api.store.wait_for(gone, timeout=10), "Xid 79 is critical: gpu-0 must leave the pool"
        channel = grpc.insecure_channel(f"unix:{kubelet.plugins_dir / DRIVER / 'dra.sock'}")
        stream = drahealth_grpc.DRAResourceHealthStub(channel).NodeWatchResources(  # type: ignore[no-untyped-call]
            drahealth_pb2.NodeWatchResourcesRequest(), timeout=10
        )
        health = {d.device.device_name: d.health for d in next(stream).devices}
        stream.cancel()
        channel.close()
        assert health["gpu-0"] == drahealth_pb2.UNHEALTHY and health["gpu-1"] == drahealth_pb2.HEALTHY
        assert _generation(kubelet) > generation
    finally:
        reap(process)
