"""What the mock kubelet knows: resources from ListAndWatch and the pod -> devices record, behind one lock."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from gpuslice.kubelet import errors
from gpuslice.kubelet.checkpoint import Restored
from gpuslice.kubelet.endpoint import PluginEndpoint
from gpuslice.kubelet.views import Admission, GrantedDevices, PluginOptions, ResourceView
from gpuslice.wire import HEALTHY, UNHEALTHY, deviceplugin_pb2

log = logging.getLogger("gpuslice.kubelet")

PodKey = tuple[str, str]  # (namespace, pod name)
Predicate = Callable[[Mapping[str, ResourceView]], bool]


@dataclass
class _Resource:
    name: str
    devices: dict[str, str] = field(default_factory=dict)
    numa_nodes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    endpoint: PluginEndpoint | None = None
    options: PluginOptions | None = None
    registered: bool = False
    stopped_at: float | None = None
    attempts: int = 0
    registrations: int = 0
    updates: int = 0
    last_message: deviceplugin_pb2.ListAndWatchResponse | None = None


@dataclass
class _Pod:
    uid: str
    containers: dict[str, dict[str, GrantedDevices]] = field(default_factory=dict)


class KubeletState:
    """Thread-safe state; every change wakes `wait_for` callers through one condition variable."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._resources: dict[str, _Resource] = {}
        self._pods: dict[PodKey, _Pod] = {}
        self.generation = 0
        self._change_listeners: list[Callable[[], None]] = []

    def add_change_listener(self, listener: Callable[[], None]) -> None:
        """Called (outside the lock) after devices or pods change; the checkpoint writer uses it."""
        self._change_listeners.append(listener)

    def _changed(self) -> None:
        for listener in self._change_listeners:
            listener()

    # Registration and ListAndWatch -------------------------------------------------------------

    def count_attempt(self, resource: str) -> None:
        with self._cond:
            self._resource(resource).attempts += 1
            self._cond.notify_all()

    def install(self, endpoint: PluginEndpoint, options: PluginOptions, generation: int) -> PluginEndpoint | None:
        """Make `endpoint` the resource's endpoint (newest wins) and return the one it replaces."""
        with self._cond:
            if generation != self.generation:
                raise errors.RegistrationRefused("kubelet restarted while the registration was in flight")
            entry = self._resource(endpoint.resource)
            old = entry.endpoint
            entry.endpoint, entry.options, entry.registered = endpoint, options, True
            entry.stopped_at = None
            entry.registrations += 1
            self._cond.notify_all()
        log.info(
            "registered device plugin for %s at %s (preferred allocation: %s, pre-start: %s)",
            endpoint.resource,
            endpoint.endpoint,
            options.get_preferred_allocation_available,
            options.pre_start_required,
        )
        return old

    def apply_list(self, endpoint: PluginEndpoint, response: deviceplugin_pb2.ListAndWatchResponse) -> None:
        """A ListAndWatch message replaces the whole view; only exactly "Healthy" is healthy."""
        with self._cond:
            entry = self._resources.get(endpoint.resource)
            if entry is None or entry.endpoint is not endpoint or endpoint.stopping:
                return
            entry.devices = {d.ID: HEALTHY if d.health == HEALTHY else UNHEALTHY for d in response.devices}
            entry.numa_nodes = {d.ID: tuple(node.ID for node in d.topology.nodes) for d in response.devices}
            entry.updates += 1
            entry.last_message = deviceplugin_pb2.ListAndWatchResponse()
            entry.last_message.CopyFrom(response)
            healthy = sum(1 for health in entry.devices.values() if health == HEALTHY)
            self._cond.notify_all()
        log.info(
            "ListAndWatch update for %s: capacity %d, allocatable %d", endpoint.resource, len(entry.devices), healthy
        )
        self._changed()

    def stream_ended(self, endpoint: PluginEndpoint, cause: str) -> None:
        """The stream ended on its own: every device turns unhealthy; only a new Register brings it back."""
        with self._cond:
            entry = self._resources.get(endpoint.resource)
            if entry is None or entry.endpoint is not endpoint or endpoint.stopping:
                return
            entry.devices = dict.fromkeys(entry.devices, UNHEALTHY)
            entry.registered = False
            entry.stopped_at = time.time()
            self._cond.notify_all()
        log.warning(errors.stream_ended(endpoint.resource, cause))
        self._changed()

    def forget_endpoints(self) -> list[PluginEndpoint]:
        """Kubelet restart: every resource is known but empty and stopped until its plugin registers again."""
        with self._cond:
            self.generation += 1
            endpoints = [entry.endpoint for entry in self._resources.values() if entry.endpoint is not None]
            now = time.time()
            for entry in self._resources.values():
                entry.devices, entry.numa_nodes = {}, {}
                entry.endpoint, entry.options, entry.registered = None, None, False
                entry.stopped_at = now
            self._cond.notify_all()
        self._changed()
        return endpoints

    def endpoints(self) -> list[PluginEndpoint]:
        with self._cond:
            return [entry.endpoint for entry in self._resources.values() if entry.endpoint is not None]

    def endpoint_for(self, resource: str) -> tuple[PluginEndpoint | None, PluginOptions | None]:
        with self._cond:
            entry = self._resources.get(resource)
            return (entry.endpoint, entry.options) if entry is not None else (None, None)

    def last_message(self, resource: str) -> deviceplugin_pb2.ListAndWatchResponse | None:
        with self._cond:
            entry = self._resources.get(resource)
            return entry.last_message if entry is not None else None

    def restore(self, restored: Restored) -> None:
        """Start from a checkpoint: its resources known but empty and stopped, its pods holding their devices."""
        with self._cond:
            now = time.time()
            for resource in restored.resources:
                self._resource(resource).stopped_at = now
            for item in restored.containers:
                pod = self._pods.setdefault((item.namespace, item.pod), _Pod(item.uid))
                pod.containers.setdefault(item.container, {})[item.allocation.resource] = item.allocation
                self._resource(item.allocation.resource)
            self._cond.notify_all()

    # Views and waiting ------------------------------------------------------------------------

    def views(self) -> dict[str, ResourceView]:
        with self._cond:
            return self._views_locked()

    def wait_for(self, predicate: Predicate, timeout_s: float | None) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: predicate(self._views_locked()), timeout_s)

    def _views_locked(self) -> dict[str, ResourceView]:
        allocated = self._allocated_locked()
        return {
            name: ResourceView(
                name=name,
                devices=dict(entry.devices),
                registered=entry.registered,
                options=entry.options,
                endpoint=entry.endpoint.endpoint if entry.endpoint is not None else None,
                allocated=frozenset(allocated.get(name, set())),
                registrations=entry.registrations,
                registration_attempts=entry.attempts,
                updates=entry.updates,
                stopped_at=entry.stopped_at,
                numa_nodes=dict(entry.numa_nodes),
            )
            for name, entry in sorted(self._resources.items())
        }

    def _resource(self, name: str) -> _Resource:
        if name not in self._resources:
            self._resources[name] = _Resource(name)
        return self._resources[name]

    # Pods --------------------------------------------------------------------------------------

    def _allocated_locked(self) -> dict[str, set[str]]:
        allocated: dict[str, set[str]] = {}
        for pod in self._pods.values():
            for by_resource in pod.containers.values():
                for resource, allocation in by_resource.items():
                    allocated.setdefault(resource, set()).update(allocation.device_ids)
        return allocated

    def candidates(self, key: PodKey, uid: str, container: str, resource: str, count: int) -> GrantedDevices | set[str]:
        """The kubelet's checks before choosing devices, in its order.

        Returns the container's existing allocation when it already holds this resource (same
        count), otherwise the free healthy devices; raises AdmissionFailure with the kubelet's text.
        """
        with self._cond:
            pod = self._pods.get(key)
            prior = pod.containers.get(container, {}).get(resource) if pod is not None else None
            if prior is not None:
                if len(prior.device_ids) != count:
                    text = errors.changed_request(uid, container, resource, len(prior.device_ids), count)
                    raise errors.AdmissionFailure(text)
                return prior
            entry = self._resources.get(resource)
            if entry is None:
                raise errors.AdmissionFailure(errors.unregistered(resource))
            healthy = {device for device, health in entry.devices.items() if health == HEALTHY}
            if not healthy:
                raise errors.AdmissionFailure(errors.no_healthy_devices(resource))
            available = healthy - self._allocated_locked().get(resource, set())
            if len(available) < count:
                raise errors.AdmissionFailure(errors.not_enough_devices(resource, count, len(available)))
            return available

    def numa_of(self, resource: str, devices: tuple[str, ...]) -> dict[str, tuple[int, ...]]:
        with self._cond:
            entry = self._resources.get(resource)
            known = entry.numa_nodes if entry is not None else {}
            return {device: known.get(device, ()) for device in devices}

    def record(self, key: PodKey, uid: str, container: str, allocations: Mapping[str, GrantedDevices]) -> None:
        if not allocations:
            return
        with self._cond:
            pod = self._pods.setdefault(key, _Pod(uid))
            pod.containers.setdefault(container, {}).update(allocations)
            self._cond.notify_all()
        self._changed()

    def remove_pod(self, key: PodKey) -> bool:
        with self._cond:
            removed = self._pods.pop(key, None) is not None
            self._cond.notify_all()
        if removed:
            self._changed()
        return removed

    def admissions(self) -> list[Admission]:
        """Every admitted container, sorted by namespace, pod and container."""
        with self._cond:
            return [
                Admission(pod=name, namespace=namespace, container=container, uid=pod.uid, allocations=dict(by_res))
                for (namespace, name), pod in sorted(self._pods.items())
                for container, by_res in sorted(pod.containers.items())
            ]

    def registered_healthy(self) -> dict[str, list[str]]:
        """Resource -> healthy ids: the checkpoint's RegisteredDevices."""
        with self._cond:
            return {
                name: sorted(device for device, health in entry.devices.items() if health == HEALTHY)
                for name, entry in sorted(self._resources.items())
            }
