"""ResourceSlices for one node's pool, in resource.k8s.io v1, v1beta2 or v1beta1 (pure: no I/O)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from gpuslice.dra.devices import DraDevice, gpu_counters
from gpuslice.dra.names import counter_set_name
from gpuslice.records import record

API_GROUP = "resource.k8s.io"
API_VERSIONS = ("v1", "v1beta2", "v1beta1")  # newest first: the order we try them in
MAX_DEVICES_PER_SLICE = 128  # ResourceSliceMaxDevices
MAX_COUNTER_SETS_PER_SLICE = 8  # 1.35+: counter sets per slice
COUNTER_LAYOUTS = ("combined", "split")
POOL_LABEL = "gpuslice.io/dra-pool"


@record
class PoolSpec:
    """Whose pool: the driver, the node (the pool is named after it) and the API version to write."""

    driver: str
    node_name: str
    api_version: str = "v1"
    # combined: a GPU's counter set in the slice of its placements (1.33/1.34); split: counter sets in
    # slices of their own, apart from all devices (1.35+ refuses a slice with both).
    counter_layout: str = "combined"

    def __post_init__(self) -> None:
        if self.api_version not in API_VERSIONS:
            raise ValueError(f"resource API version {self.api_version!r}: choose one of {', '.join(API_VERSIONS)}")
        if self.counter_layout not in COUNTER_LAYOUTS:
            raise ValueError(f"counter layout {self.counter_layout!r}: choose one of {', '.join(COUNTER_LAYOUTS)}")


def _device_body(device: DraDevice, api_version: str) -> dict[str, Any]:
    body: dict[str, Any] = {
        "attributes": {key: dict(value) for key, value in device.attributes.items()},
        "capacity": {key: {"value": value} for key, value in device.capacity.items()},
    }
    if device.counter_set is not None:
        counters = {name: {"value": value} for name, value in device.consumes.items()}
        body["consumesCounters"] = [{"counterSet": device.counter_set, "counters": counters}]
    if api_version == "v1beta1":
        return {"name": device.name, "basic": body}
    return {"name": device.name, **body}


def _groups(devices: Sequence[DraDevice]) -> list[tuple[DraDevice | None, list[DraDevice]]]:
    """Slices' contents: the plain devices in chunks of 128, then one slice per dynamic-MIG GPU.

    Combined layout: a GPU's counter set must sit in the slice of the devices that consume it (the
    1.33/1.34 rule), and a slice holds at most 32 counters in all, so each dynamic GPU (15 counters)
    gets its own slice; the first device of a group names the GPU whose counter set goes with it.
    """
    plain = [device for device in devices if device.placement is None]
    groups: list[tuple[DraDevice | None, list[DraDevice]]] = [
        (None, plain[start : start + MAX_DEVICES_PER_SLICE]) for start in range(0, len(plain), MAX_DEVICES_PER_SLICE)
    ]
    by_gpu: dict[str, list[DraDevice]] = {}
    for device in devices:
        if device.placement is not None:
            by_gpu.setdefault(device.gpu.uuid, []).append(device)
    for members in by_gpu.values():
        groups.append((members[0], members))
    return groups


def build_slices(pool: PoolSpec, devices: Iterable[DraDevice], generation: int) -> list[dict[str, Any]]:
    """The pool's slices at `generation`; an empty pool is one slice with no devices (the pool still exists)."""
    ordered = list(devices)
    groups = _groups(ordered) or [(None, [])]
    counter_only: list[list[DraDevice]] = []
    if pool.counter_layout == "split":
        owners = [dynamic for dynamic, _ in groups if dynamic is not None and dynamic.counter_set is not None]
        counter_only = [
            owners[start : start + MAX_COUNTER_SETS_PER_SLICE]
            for start in range(0, len(owners), MAX_COUNTER_SETS_PER_SLICE)
        ]
        groups = [(None, members) for _, members in groups]
    total = len(groups) + len(counter_only)
    specs: list[dict[str, Any]] = []
    for dynamic, members in groups:
        spec: dict[str, Any] = {"devices": [_device_body(device, pool.api_version) for device in members]}
        if dynamic is not None and dynamic.counter_set is not None:
            spec["sharedCounters"] = [_counter_set(dynamic)]
        specs.append(spec)
    for owners in counter_only:
        specs.append({"sharedCounters": [_counter_set(owner) for owner in owners]})
    slices = []
    for position, body in enumerate(specs):
        spec = {
            "driver": pool.driver,
            "nodeName": pool.node_name,
            "pool": {"name": pool.node_name, "generation": generation, "resourceSliceCount": total},
            **body,
        }
        slices.append(
            {
                "apiVersion": f"{API_GROUP}/{pool.api_version}",
                "kind": "ResourceSlice",
                "metadata": {
                    "name": slice_name(pool, position),
                    "labels": {POOL_LABEL: pool.node_name},
                },
                "spec": spec,
            }
        )
    return slices


def _counter_set(owner: DraDevice) -> dict[str, Any]:
    counters = {name: {"value": value} for name, value in gpu_counters(owner.gpu).items()}
    return {"name": counter_set_name(owner.gpu), "counters": counters}


def slice_name(pool: PoolSpec, position: int) -> str:
    """`<node>-<driver>-<n>`: stable names, so a republish replaces the same objects (≤253 characters)."""
    return f"{pool.node_name}-{pool.driver}-{position}"[:253]


def devices_of(slice_object: dict[str, Any]) -> list[dict[str, Any]]:
    """A slice's devices in the v1 shape (attributes, capacity, consumesCounters directly on the device)."""
    found = []
    for device in slice_object.get("spec", {}).get("devices") or []:
        basic = device.get("basic")
        found.append({"name": device["name"], **basic} if isinstance(basic, dict) else dict(device))
    return found
