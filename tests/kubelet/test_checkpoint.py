"""The kubelet_internal_checkpoint file: written on every change, read back on start, distrusted when corrupt."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gpuslice.fsutil.checkpoint import fnv32a
from gpuslice.kubelet import MockKubelet
from gpuslice.kubelet.checkpoint import CheckpointError, checksum, read
from gpuslice.wire import deviceplugin_pb2
from tests.kubelet.conftest import MakePlugin, register
from tests.kubelet.fake_plugin import FakeDevicePlugin

RESOURCE = "example.com/fake"
ENTRY = {"PodUID": "u", "ContainerName": "c", "ResourceName": RESOURCE, "DeviceIDs": {"-1": ["d0"]}, "AllocResp": ""}
NAME = {"Name": "p", "Namespace": "n"}


def test_fnv32a_reference_values() -> None:
    assert fnv32a(b"") == 0x811C9DC5
    assert fnv32a(b"a") == 0xE40C292C
    assert fnv32a(b"foobar") == 0xBF9CF968


def test_checkpoint_records_pods_and_registered_devices(kubelet: MockKubelet, make_plugin: MakePlugin) -> None:
    plugin = make_plugin(numa={"d3": 1})
    register(kubelet, plugin)
    admission = kubelet.admit("pod-a", {RESOURCE: 2}, container="c")
    assert kubelet.checkpoint_path is not None
    document = json.loads(kubelet.checkpoint_path.read_text())
    [entry] = document["Data"]["PodDeviceEntries"]
    assert (entry["PodUID"], entry["ContainerName"], entry["ResourceName"]) == (admission.uid, "c", RESOURCE)
    assert entry["DeviceIDs"] == {"-1": ["d2"], "1": ["d3"]}
    response = deviceplugin_pb2.ContainerAllocateResponse.FromString(base64.b64decode(entry["AllocResp"]))
    assert dict(response.envs) == {"FAKE_DEVICES": "d3,d2"}
    assert document["Data"]["RegisteredDevices"] == {RESOURCE: ["d0", "d1", "d2", "d3"]}
    assert isinstance(document["Checksum"], int)
    kubelet.delete_pod("pod-a")
    assert json.loads(kubelet.checkpoint_path.read_text())["Data"]["PodDeviceEntries"] == []


def test_a_new_kubelet_restores_pods_from_the_checkpoint(workdir: Path) -> None:
    directory = workdir / "device-plugins"
    with MockKubelet(directory, dial_timeout_s=2.0) as first:
        plugin = FakeDevicePlugin(directory, "fake.sock", ["d0", "d1"], numa={"d1": 0}).start()
        try:
            register(first, plugin)
            held = first.admit_one("pod-a", RESOURCE, 1, namespace="ns")
        finally:
            plugin.stop()
    with MockKubelet(directory) as second:
        [restored] = second.admissions()
        assert (restored.pod, restored.namespace, restored.container) == ("pod-a", "ns", "main")
        allocation = restored.allocations[RESOURCE]
        assert allocation.device_ids == held.device_ids
        assert allocation.envs == held.envs
        view = second.resources()[RESOURCE]
        assert (view.registered, view.capacity, view.allocated) == (False, 0, frozenset(held.device_ids))


def _resealed(data: dict[str, Any]) -> dict[str, Any]:
    return {"Data": data, "Checksum": checksum(data)}


@pytest.mark.parametrize(
    "corrupt",
    [
        lambda doc: {**doc, "Checksum": doc["Checksum"] ^ 1},
        lambda doc: {**doc, "Data": {**doc["Data"], "RegisteredDevices": {"x/y": []}}},
        lambda doc: _resealed({**doc["Data"], "PodDeviceEntries": [{"PodUID": "x"}]}),
        lambda doc: _resealed({**doc["Data"], "PodDeviceEntries": [{**ENTRY, "AllocResp": "!!"}]}),
        lambda doc: _resealed({**doc["Data"], "PodDeviceEntries": [ENTRY], "PodNames": {}}),
        lambda doc: {"nothing": True},
    ],
)
def test_a_corrupt_checkpoint_is_not_trusted(workdir: Path, corrupt: Callable[[dict[str, Any]], Any]) -> None:
    path = workdir / "kubelet_internal_checkpoint"
    sound = _resealed({"PodDeviceEntries": [ENTRY], "RegisteredDevices": {}, "PodNames": {"u": NAME}})
    path.write_text(json.dumps(sound))
    assert read(path) is not None
    path.write_text(json.dumps(corrupt(sound)))
    with pytest.raises(CheckpointError):
        read(path)


def test_a_kubelet_starts_clean_over_a_corrupt_checkpoint(workdir: Path) -> None:
    directory = workdir / "device-plugins"
    directory.mkdir()
    (directory / "kubelet_internal_checkpoint").write_text("{not json")
    with MockKubelet(directory) as kubelet:
        assert kubelet.admissions() == [] and kubelet.resources() == {}


def test_checkpoint_can_be_turned_off(workdir: Path) -> None:
    with MockKubelet(workdir / "device-plugins", checkpoint_enabled=False) as kubelet:
        assert kubelet.checkpoint_path is None
        assert not (workdir / "device-plugins" / "kubelet_internal_checkpoint").exists()
