"""The `kubelet_internal_checkpoint` file: pod device entries and registered devices, with our own checksum.

The layout follows the kubelet's (Data.PodDeviceEntries, Data.RegisteredDevices, Checksum); the
checksum is FNV-32a over our canonical JSON of Data, because the kubelet's Go-specific dump is not
reproducible here. `Data.PodNames` is ours: the mock has no API server to map a UID back to a name.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.protobuf.message import DecodeError  # type: ignore[import-untyped]

from gpuslice.fsutil.atomic import atomic_write_text
from gpuslice.fsutil.checkpoint import canonical_json, fnv32a
from gpuslice.kubelet.views import Admission, GrantedDevices
from gpuslice.wire import deviceplugin_pb2

CHECKPOINT_FILE = "kubelet_internal_checkpoint"
NO_NUMA_KEY = "-1"


class CheckpointError(ValueError):
    """The checkpoint is unreadable or its checksum does not match; it is not trusted."""


@dataclass(frozen=True)
class RestoredContainer:
    namespace: str
    pod: str
    uid: str
    container: str
    allocation: GrantedDevices


@dataclass(frozen=True)
class Restored:
    containers: list[RestoredContainer]
    resources: list[str]


def checksum(data: Mapping[str, Any]) -> int:
    return fnv32a(canonical_json(data))  # the one module that computes checkpoint checksums


def _device_ids_by_numa(allocation: GrantedDevices) -> dict[str, list[str]]:
    by_numa: dict[str, list[str]] = {}
    for device in allocation.device_ids:
        for numa in allocation.numa_nodes.get(device) or ():
            by_numa.setdefault(str(numa), []).append(device)
        if not allocation.numa_nodes.get(device):
            by_numa.setdefault(NO_NUMA_KEY, []).append(device)
    return by_numa


def encode(admissions: Iterable[Admission], registered: Mapping[str, list[str]]) -> dict[str, Any]:
    entries: list[dict[str, Any]] = []
    names: dict[str, dict[str, str]] = {}
    for admission in admissions:
        names[admission.uid] = {"Name": admission.pod, "Namespace": admission.namespace}
        for resource, allocation in sorted(admission.allocations.items()):
            entries.append(
                {
                    "PodUID": admission.uid,
                    "ContainerName": admission.container,
                    "ResourceName": resource,
                    "DeviceIDs": _device_ids_by_numa(allocation),
                    "AllocResp": base64.b64encode(allocation.response.SerializeToString()).decode(),
                }
            )
    data = {"PodDeviceEntries": entries, "RegisteredDevices": dict(registered), "PodNames": names}
    return {"Data": data, "Checksum": checksum(data)}


def write(path: Path, document: Mapping[str, Any]) -> None:
    """Atomic replace, so a crash never leaves half a checkpoint."""
    atomic_write_text(path, json.dumps(document, indent=1, sort_keys=True))


def _restore_entry(entry: Mapping[str, Any], names: Mapping[str, Any]) -> RestoredContainer:
    uid = str(entry["PodUID"])
    device_ids: list[str] = []
    numa_nodes: dict[str, tuple[int, ...]] = {}
    for numa, ids in sorted(entry["DeviceIDs"].items()):
        for device in ids:
            if device not in device_ids:
                device_ids.append(str(device))
            if numa != NO_NUMA_KEY:
                numa_nodes[device] = (*numa_nodes.get(device, ()), int(numa))
    response = deviceplugin_pb2.ContainerAllocateResponse()
    response.ParseFromString(base64.b64decode(entry["AllocResp"], validate=True))
    allocation = GrantedDevices(
        resource=str(entry["ResourceName"]), device_ids=tuple(device_ids), response=response, numa_nodes=numa_nodes
    )
    name = names[uid]
    return RestoredContainer(str(name["Namespace"]), str(name["Name"]), uid, str(entry["ContainerName"]), allocation)


def read(path: Path) -> Restored | None:
    """None when there is no checkpoint; CheckpointError when there is one we cannot trust."""
    try:
        document = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{path}: unreadable: {exc}") from exc
    try:
        data = document["Data"]
        if checksum(data) != document["Checksum"]:
            raise CheckpointError(f"{path}: checksum mismatch")
        names = data.get("PodNames", {})
        containers = [_restore_entry(entry, names) for entry in data["PodDeviceEntries"]]
        return Restored(containers=containers, resources=sorted(data["RegisteredDevices"]))
    except CheckpointError:
        raise
    except (KeyError, TypeError, AttributeError, ValueError, binascii.Error, DecodeError) as exc:
        raise CheckpointError(f"{path}: malformed: {exc!r}") from exc
