"""Shared counters checked, not assumed: a server that drops them gets a layout with no overlapping placements."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from gpuslice.dra.api import ApiError
from gpuslice.dra.devices import DraDevice
from gpuslice.dra.slices import API_GROUP, PoolSpec, devices_of, slice_name

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from prometheus_client.core import Metric

log = logging.getLogger("gpuslice.dra")

PROBE_COUNTER_SET = "counter-probe"
METRIC_PREFIX = "gpuslice_dra"
STATES = ("unknown", "supported", "dropped")


class SliceStore(Protocol):
    """The part of dra.api.ResourceApi the check needs."""

    def list_slices(self, driver: str, node_name: str) -> list[dict[str, Any]]: ...

    def apply_slice(self, obj: dict[str, Any]) -> None: ...

    def delete_slice(self, name: str) -> None: ...


def carries_counters(obj: Mapping[str, Any]) -> bool:
    """Does this slice state counters (a counter set, or a device consuming one)?"""
    spec = obj.get("spec") or {}
    return bool(spec.get("sharedCounters")) or any(device.get("consumesCounters") for device in devices_of(dict(obj)))


def counters_dropped(written: Iterable[Mapping[str, Any]], stored: Iterable[Mapping[str, Any]]) -> bool:
    """True when a slice we wrote with counters is stored without them (read back by name)."""
    by_name = {obj.get("metadata", {}).get("name"): obj for obj in stored}
    for obj in written:
        if not carries_counters(obj):
            continue
        kept = by_name.get(obj["metadata"]["name"])
        if kept is None:
            continue  # gone already (a kubelet wipe): nothing to judge by
        spec, kept_spec = obj.get("spec") or {}, kept.get("spec") or {}
        if spec.get("sharedCounters") and not kept_spec.get("sharedCounters"):
            return True
        wanted = {device["name"] for device in devices_of(dict(obj)) if device.get("consumesCounters")}
        if any(device["name"] in wanted and not device.get("consumesCounters") for device in devices_of(dict(kept))):
            return True
    return False


def guarded_devices(devices: Sequence[DraDevice]) -> list[DraDevice]:
    """The pool for a server that cannot see counters: plain devices as they are, and per dynamic-MIG GPU
    a set of placements no two of which overlap, so that the scheduler's one-claim-per-device rule alone
    keeps them apart.

    The set is the GPU's current MIG layout (the instances it has now, e.g. of claims prepared before a
    restart) when it has one, else the GPU's full profile at slice 0: the whole GPU as one device. It
    never changes while the plugin runs: a layout that moved with prepares could offer a placement that
    overlaps one the scheduler has allocated but the kubelet has not prepared yet.
    """
    plain = [device for device in devices if device.placement is None]
    by_gpu: dict[str, list[DraDevice]] = {}
    for device in devices:
        if device.placement is not None:
            by_gpu.setdefault(device.gpu.uuid, []).append(device)
    chosen: list[DraDevice] = []
    for members in by_gpu.values():
        chosen.extend(replace(device, consumes={}) for device in _layout(members))
    position = {device.name: index for index, device in enumerate(devices)}
    return sorted([*plain, *chosen], key=lambda device: position[device.name])


def _layout(placements: Sequence[DraDevice]) -> list[DraDevice]:
    gpu = placements[0].gpu
    current = {(mig.profile, mig.placement_start) for mig in gpu.mig_instances}
    picked = [d for d in placements if d.placement and (d.placement.profile.name, d.placement.start) in current]
    if not picked:
        picked = [max(placements, key=_size)]
    layout: list[DraDevice] = []
    used = 0
    for device in sorted(picked, key=lambda d: d.placement.start if d.placement else 0):
        mask = _mask(device)
        if mask & used:
            continue  # cannot happen for real instances; refuse to offer an overlap whatever the input
        used |= mask
        layout.append(device)
    return layout


def _size(device: DraDevice) -> tuple[int, int, int]:
    assert device.placement is not None
    profile = device.placement.profile
    return profile.memory_slices, profile.sm_slices, -device.placement.start


def _mask(device: DraDevice) -> int:
    assert device.placement is not None
    return device.placement.mask


def probe_slice(pool: PoolSpec) -> dict[str, Any]:
    """A slice of a pool of its own with one counter set and no devices: valid in every version that has
    counters (1.35+ wants counter sets apart from devices anyway), and invisible to allocation."""
    name = f"{pool.node_name}-counter-probe"[:253]
    return {
        "apiVersion": f"{API_GROUP}/{pool.api_version}",
        "kind": "ResourceSlice",
        "metadata": {"name": slice_name(pool, 0)[:230] + "-counter-probe"},
        "spec": {
            "driver": pool.driver,
            "nodeName": pool.node_name,
            "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
            "devices": [],
            "sharedCounters": [{"name": PROBE_COUNTER_SET, "counters": {"probe": {"value": "1"}}}],
        },
    }


class CounterSupport:
    """Whether the API server keeps shared counters, learned by writing and reading back, with its metric.

    `gpuslice_dra_shared_counters{state}` is 1 for the state known now (unknown, supported, dropped);
    `gpuslice_dra_guarded_gpus` counts the dynamic-MIG GPUs offered in the counter-free layout.
    """

    def __init__(self) -> None:
        self.state = "unknown"
        self.guarded = 0  # what the gauge says; set when the counter-free layout is offered
        self._registry: CollectorRegistry | None = None
        self._lock = threading.Lock()
        self._probed = False

    @property
    def registry(self) -> CollectorRegistry:
        """A Prometheus registry exporting the two metrics (the client is imported here, on first use:
        a `gpuslice dra` without a metrics port never loads it)."""
        with self._lock:
            if self._registry is None:
                from prometheus_client import CollectorRegistry

                from gpuslice.node.metrics_server import LiveCollector

                registry = CollectorRegistry(auto_describe=True)
                registry.register(LiveCollector(self))
                self._registry = registry
            return self._registry

    def families(self) -> list[Metric]:
        from prometheus_client.core import GaugeMetricFamily

        state = GaugeMetricFamily(
            f"{METRIC_PREFIX}_shared_counters",
            "1 for whether the API server keeps ResourceSlice shared counters (unknown, supported, dropped)",
            labels=["state"],
        )
        for known in STATES:
            state.add_metric([known], 1 if known == self.state else 0)
        guarded = GaugeMetricFamily(
            f"{METRIC_PREFIX}_guarded_gpus",
            "Dynamic-MIG GPUs offered as one fixed layout because the API server drops shared counters",
            self.guarded,
        )
        return [state, guarded]

    def _set(self, state: str) -> None:
        with self._lock:
            if state == "dropped" and self.state != "dropped":
                log.warning(
                    "the API server dropped the shared counters of our ResourceSlices (Kubernetes 1.32, or "
                    "1.33/1.34 without the DRAPartitionableDevices feature gate): dynamic MIG GPUs are offered "
                    "as their current MIG layout, or as one whole-GPU placement, so that no two offered "
                    "placements overlap"
                )
            self.state = state

    @property
    def dropped(self) -> bool:
        return self.state == "dropped"

    def probe(self, api: SliceStore, pool: PoolSpec, devices: Sequence[DraDevice]) -> None:
        """Before the first publish of placements: write a probe slice, read it back, delete it."""
        if self._probed or not any(device.placement is not None for device in devices):
            return
        self._probed = True
        probe = probe_slice(pool)
        try:
            api.apply_slice(probe)
            stored = api.list_slices(pool.driver, pool.node_name)
        except ApiError as exc:
            # e.g. a server that wants devices with its counters: the read-back of the real slices decides
            log.info("counter probe refused (%s); checking the published slices instead", exc)
            return
        finally:
            try:
                api.delete_slice(probe["metadata"]["name"])
            except ApiError as exc:
                log.warning("could not delete the counter probe slice: %s", exc)
        if any(obj.get("metadata", {}).get("name") == probe["metadata"]["name"] for obj in stored):
            self._set("dropped" if counters_dropped([probe], stored) else "supported")

    def observe(self, written: Sequence[Mapping[str, Any]], stored: Sequence[Mapping[str, Any]]) -> bool:
        """Judge by a read-back of what was published; True when counters were found dropped just now."""
        if self.dropped:
            return False
        if counters_dropped(written, stored):
            self._set("dropped")
            return True
        if any(carries_counters(obj) for obj in written):
            self._set("supported")
        return False

    def offered(self, devices: Sequence[DraDevice]) -> Sequence[DraDevice]:
        """The devices to publish: all of them, or the counter-free layout once counters are known dropped."""
        if not self.dropped:
            return devices
        guarded = guarded_devices(list(devices))
        self.guarded = len({device.gpu.uuid for device in guarded if device.placement is not None})
        return guarded
