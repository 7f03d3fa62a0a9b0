"""`MockDraKubelet`: the DRA side of a kubelet, with the scheduler's allocator, for tests and the demo.

It owns an in-memory API (served over HTTP for the plugin's lightkube client), the plugin watcher on
`<root>/plugins_registry`, and pod admission: allocate each claim against the published slices, reserve
it for the pod, call NodePrepareResources once per driver, hand out the CDI IDs; on pod deletion call
NodeUnprepareResources for claims no other pod uses and deallocate them.
"""

from __future__ import annotations

import copy
import logging
import threading
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import grpc

from gpuslice.kubelet.dra_allocator import UnallocatableClaim, allocate
from gpuslice.kubelet.dra_api import FakeKubeApi
from gpuslice.kubelet.dra_plugins import RECONCILE_S, PluginWatcher

log = logging.getLogger("gpuslice.kubelet.dra")

KUBELET_REGISTRY_DIR = "plugins_registry"
KUBELET_PLUGINS_DIR = "plugins"
CALL_TIMEOUT_S = 45.0  # the kubelet's per-call timeout for DRA drivers


class DraAdmissionError(Exception):
    """A pod that cannot start: unschedulable claims, or per-claim errors from a driver (claim -> message)."""

    def __init__(self, pod: str, errors: Mapping[str, str]) -> None:
        self.pod = pod
        self.errors = dict(errors)
        super().__init__(f"pod {pod}: " + "; ".join(f"{claim}: {error}" for claim, error in self.errors.items()))


@dataclass(frozen=True)
class ClaimDevice:
    request_names: tuple[str, ...]
    pool: str
    device: str
    cdi_ids: tuple[str, ...]


@dataclass(frozen=True)
class DraAdmission:
    """A started pod: per claim name, the devices the driver prepared (with their CDI IDs)."""

    pod: str
    namespace: str
    claims: Mapping[str, tuple[ClaimDevice, ...]] = field(default_factory=dict)

    @property
    def cdi_ids(self) -> tuple[str, ...]:
        return tuple(cdi for devices in self.claims.values() for device in devices for cdi in device.cdi_ids)


class MockDraKubelet:
    """Not started by the constructor: `start()` (returns self) or use it as a context manager."""

    def __init__(
        self,
        root: str | Path,
        node_name: str,
        *,
        served_versions: Iterable[str] = ("v1",),
        counters_apart: bool = False,
        drop_counters: bool = False,
        reconcile_s: float = RECONCILE_S,
        call_timeout_s: float = CALL_TIMEOUT_S,
    ) -> None:
        self.root = Path(root).absolute()
        self.registry_dir = self.root / KUBELET_REGISTRY_DIR
        self.plugins_dir = self.root / KUBELET_PLUGINS_DIR
        self.node_name = node_name
        self.call_timeout_s = call_timeout_s
        self.api = FakeKubeApi(served_versions, counters_apart, drop_counters)
        self.watcher = PluginWatcher(self.registry_dir, reconcile_s, on_deregistered=self._wipe_driver)
        self.restarts = 0
        self._pods: dict[tuple[str, str], list[str]] = {}  # (namespace, pod) -> claim names
        self._lock = threading.RLock()

    # Lifecycle ---------------------------------------------------------------------------------

    @property
    def api_url(self) -> str:
        return self.api.url

    def start(self) -> Self:
        self.api.start()
        self.plugins_dir.mkdir(parents=True, exist_ok=True)
        self._wipe_node_slices()
        self.watcher.start()
        return self

    def stop(self) -> None:
        self.watcher.stop()
        self.api.stop()

    def restart(self) -> None:
        """A kubelet restart: registrations forgotten, the node's slices wiped, the registry walked again."""
        self.watcher.stop()
        self._wipe_node_slices()
        self.watcher.start()
        self.restarts += 1

    def reprepare_running_pods(self, timeout: float = 10.0) -> dict[str, tuple[ClaimDevice, ...]]:
        """What a restarted kubelet does for running pods: their claims come back unprepared from its
        checkpoint, so it calls NodePrepareResources again (the driver must answer as before). Waits up to
        `timeout` for each driver to register first; raises DraAdmissionError with per-claim errors."""
        with self._lock:
            names = sorted({(namespace, claim) for (namespace, _), claims in self._pods.items() for claim in claims})
            objects = {}
            for namespace, name in names:
                claim = self.claim(name, namespace)
                if claim is not None and (claim.get("status") or {}).get("allocation"):
                    objects[name] = claim
            for driver in self._by_driver(objects.values()):
                self.watcher.wait_registered(driver, timeout)
            prepared, errors = self._prepare(objects)
            if errors:
                raise DraAdmissionError("(running pods)", errors)
            return prepared

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _wipe_node_slices(self) -> None:
        for obj in self.api.store.list("resourceslices", {"spec.nodeName": self.node_name}):
            self.api.store.delete("resourceslices", obj["metadata"]["name"])

    def _wipe_driver(self, driver: str) -> None:
        for obj in self.api.store.list("resourceslices", {"spec.nodeName": self.node_name, "spec.driver": driver}):
            self.api.store.delete("resourceslices", obj["metadata"]["name"])

    # Cluster objects ---------------------------------------------------------------------------

    def add_device_class(self, obj: Mapping[str, Any]) -> None:
        self.api.store.put("deviceclasses", copy.deepcopy(dict(obj)), create=True)

    def create_claim(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Create a ResourceClaim (v1 shape); returns it with its UID."""
        claim = copy.deepcopy(dict(obj))
        claim.setdefault("metadata", {}).setdefault("namespace", "default")
        return self.api.store.put("resourceclaims", claim, create=True)

    def claim(self, name: str, namespace: str = "default") -> dict[str, Any] | None:
        return self.api.store.get("resourceclaims", name, namespace)

    def slices(self, driver: str | None = None) -> list[dict[str, Any]]:
        fields = {"spec.nodeName": self.node_name, **({"spec.driver": driver} if driver else {})}
        return self.api.store.list("resourceslices", fields)

    def wait_for_slices(self, driver: str, min_devices: int = 1, timeout: float = 10.0) -> bool:
        def ready() -> bool:
            found = self.slices(driver)
            return bool(found) and sum(len(s["spec"].get("devices") or []) for s in found) >= min_devices

        return self.api.store.wait_for(ready, timeout)

    # Pods --------------------------------------------------------------------------------------

    def admit(self, pod: str, claims: Sequence[str], namespace: str = "default") -> DraAdmission:
        """Allocate, reserve and prepare the pod's claims; DraAdmissionError (per claim) if it cannot start."""
        with self._lock:
            pod_uid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"pod/{namespace}/{pod}"))
            errors: dict[str, str] = {}
            objects = {}
            for name in claims:
                try:
                    objects[name] = self._allocate_and_reserve(name, namespace, pod, pod_uid)
                except (UnallocatableClaim, LookupError) as exc:
                    errors[name] = str(exc)
            if errors:
                self._release(pod, pod_uid, list(objects), namespace, prepared=False)
                raise DraAdmissionError(pod, errors)
            prepared, errors = self._prepare(objects)
            if errors:
                self._release(pod, pod_uid, list(objects), namespace, prepared=True)
                raise DraAdmissionError(pod, errors)
            self._pods[(namespace, pod)] = list(claims)
            log.info("admitted pod %s/%s with claims %s", namespace, pod, ", ".join(claims))
            return DraAdmission(pod, namespace, prepared)

    def delete_pod(self, pod: str, namespace: str = "default") -> dict[str, str]:
        """Stop the pod; returns per-claim errors from NodeUnprepareResources (empty when all went well)."""
        with self._lock:
            claims = self._pods.pop((namespace, pod), None)
            if claims is None:
                return {}
            pod_uid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"pod/{namespace}/{pod}"))
            return self._release(pod, pod_uid, claims, namespace, prepared=True)

    def _allocate_and_reserve(self, name: str, namespace: str, pod: str, pod_uid: str) -> dict[str, Any]:
        claim = self.claim(name, namespace)
        if claim is None:
            raise LookupError(f"resourceclaim {namespace}/{name} not found")
        if not (claim.get("status") or {}).get("allocation"):
            classes = {c["metadata"]["name"]: c for c in self.api.store.list("deviceclasses")}
            others = [
                c["status"]["allocation"]
                for c in self.api.store.list("resourceclaims")
                if (c.get("status") or {}).get("allocation")
            ]
            allocation = allocate(claim, classes, self.api.store.list("resourceslices"), others, self.node_name)
            if allocation is None:
                raise LookupError(f"cannot allocate all claims: {namespace}/{name} does not fit on {self.node_name}")

            def set_allocation(obj: dict[str, Any]) -> None:
                obj.setdefault("status", {})["allocation"] = allocation

            self.api.store.update("resourceclaims", name, namespace, set_allocation)

        def reserve(obj: dict[str, Any]) -> None:
            reserved = obj.setdefault("status", {}).setdefault("reservedFor", [])
            if not any(entry["uid"] == pod_uid for entry in reserved):
                reserved.append({"resource": "pods", "name": pod, "uid": pod_uid})

        return self.api.store.update("resourceclaims", name, namespace, reserve)

    def _by_driver(self, claims: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
        grouped: dict[str, list[dict[str, Any]]] = {}
        for claim in claims:
            drivers = {r["driver"] for r in claim["status"]["allocation"]["devices"]["results"]}
            for driver in sorted(drivers):
                grouped.setdefault(driver, []).append(claim)
        return grouped

    def _call(self, driver: str, method: str, claims: Sequence[dict[str, Any]]) -> tuple[dict[str, Any], str | None]:
        plugin = self.watcher.plugin(driver)
        if plugin is None:
            return {}, f"DRA driver {driver} is not registered"
        request_type = getattr(plugin.pb, f"{method}Request")
        request = request_type(
            claims=[
                plugin.pb.Claim(
                    namespace=c["metadata"]["namespace"], uid=c["metadata"]["uid"], name=c["metadata"]["name"]
                )
                for c in claims
            ]
        )
        try:
            response = getattr(plugin.stub(), method)(request, timeout=self.call_timeout_s)
        except grpc.RpcError as exc:
            return {}, f"{method} failed: {exc.code().name}: {exc.details()}"
        answered = dict(response.claims)
        wanted = {c["metadata"]["uid"] for c in claims}
        if set(answered) - wanted:
            return {}, f"{method} answered for claims that were not asked for: {sorted(set(answered) - wanted)}"
        if wanted - set(answered):
            return {}, f"{method} left out {len(wanted - set(answered))} claims"
        return answered, None

    def _prepare(
        self, claims: Mapping[str, dict[str, Any]]
    ) -> tuple[dict[str, tuple[ClaimDevice, ...]], dict[str, str]]:
        prepared: dict[str, tuple[ClaimDevice, ...]] = {}
        errors: dict[str, str] = {}
        for driver, members in self._by_driver(claims.values()).items():
            answered, problem = self._call(driver, "NodePrepareResources", members)
            for claim in members:
                name = claim["metadata"]["name"]
                entry = answered.get(claim["metadata"]["uid"])
                if problem is not None or entry is None:
                    errors[name] = problem or "no answer"
                elif entry.error:
                    errors[name] = entry.error
                else:
                    devices = tuple(
                        ClaimDevice(tuple(d.request_names), d.pool_name, d.device_name, tuple(d.cdi_device_ids))
                        for d in entry.devices
                    )
                    prepared[name] = prepared.get(name, ()) + devices
        return prepared, errors

    def _release(
        self, pod: str, pod_uid: str, names: Sequence[str], namespace: str, *, prepared: bool
    ) -> dict[str, str]:
        """Drop the pod's reservations; unprepare and deallocate the claims nobody else reserves."""
        unused = []
        for name in names:

            def unreserve(obj: dict[str, Any]) -> None:
                status = obj.setdefault("status", {})
                status["reservedFor"] = [e for e in status.get("reservedFor", []) if e["uid"] != pod_uid]

            try:
                claim = self.api.store.update("resourceclaims", name, namespace, unreserve)
            except LookupError:
                continue
            if not claim["status"]["reservedFor"]:
                unused.append(claim)
        errors: dict[str, str] = {}
        if prepared:
            for driver, members in self._by_driver(c for c in unused if c["status"].get("allocation")).items():
                answered, problem = self._call(driver, "NodeUnprepareResources", members)
                for claim in members:
                    entry = answered.get(claim["metadata"]["uid"])
                    message = problem or ("no answer" if entry is None else entry.error)
                    if message:
                        errors[claim["metadata"]["name"]] = message
        for claim in unused:
            if claim["metadata"]["name"] in errors:
                continue  # stays allocated: the driver still holds it, the kubelet retries unprepare

            def deallocate(obj: dict[str, Any]) -> None:
                obj.get("status", {}).pop("allocation", None)

            self.api.store.update("resourceclaims", claim["metadata"]["name"], namespace, deallocate)
        return errors
