"""Pod admission the kubelet way: checks, GetPreferredAllocation, top-up, then one Allocate per resource."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Mapping
from typing import Any

import grpc

from gpuslice.kubelet import errors
from gpuslice.kubelet.gotext import go_status_text
from gpuslice.kubelet.state import KubeletState, PodKey
from gpuslice.kubelet.views import Admission, GrantedDevices
from gpuslice.wire import deviceplugin_pb2

PRE_START_TIMEOUT_S = 30.0
_UID_NAMESPACE = uuid.UUID("6f1c1d0e-2b7a-4c38-9a57-51a1ce0f4b11")


def pod_uid(namespace: str, pod: str) -> str:
    """A stable UID per namespace/name; the mock has no API server to hand one out."""
    return str(uuid.uuid5(_UID_NAMESPACE, f"{namespace}/{pod}"))


def validate_request(pod: str, namespace: str, container: str, resources: Mapping[str, int]) -> None:
    for label, value in (("pod", pod), ("namespace", namespace), ("container", container)):
        if not value:
            raise ValueError(f"{label} name must not be empty")
    for resource, count in resources.items():
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(f"request for {resource!r} must be a whole number >= 0, got {count!r}")


class Admitter:
    """Admits containers one at a time, as the kubelet's admission loop does.

    Serialising admissions is what keeps two concurrent pods from being given the same device:
    candidates are computed and recorded under the same admission lock.
    """

    def __init__(self, state: KubeletState, rpc_timeout_s: float | None = None) -> None:
        self._state = state
        self._rpc_timeout_s = rpc_timeout_s
        self._lock = threading.Lock()

    def admit(self, pod: str, resources: Mapping[str, int], namespace: str, container: str) -> Admission:
        validate_request(pod, namespace, container, resources)
        key: PodKey = (namespace, pod)
        uid = pod_uid(namespace, pod)
        with self._lock:
            done: dict[str, GrantedDevices] = {}
            for resource, count in resources.items():
                if count == 0:
                    continue
                try:
                    done[resource] = self._allocate(key, uid, container, resource, count)
                except errors.AdmissionFailure as failure:
                    # Nothing of this container is recorded yet, so a rejection frees all of it.
                    reason = (
                        errors.CREATE_CONTAINER_CONFIG_ERROR
                        if str(failure).startswith("device plugin PreStartContainer")
                        else errors.UNEXPECTED_ADMISSION_ERROR
                    )
                    raise errors.AdmissionError(
                        pod=pod,
                        namespace=namespace,
                        container=container,
                        resource=resource,
                        failure=failure,
                        reason=reason,
                    ) from failure
            self._state.record(key, uid, container, done)
        return Admission(pod=pod, namespace=namespace, container=container, uid=uid, allocations=done)

    def _allocate(self, key: PodKey, uid: str, container: str, resource: str, count: int) -> GrantedDevices:
        found = self._state.candidates(key, uid, container, resource, count)
        if isinstance(found, GrantedDevices):
            return found  # a restarted container keeps its devices; no new Allocate
        endpoint, options = self._state.endpoint_for(resource)
        if endpoint is None or options is None or not endpoint.usable:
            raise errors.AdmissionFailure(errors.endpoint_stopped(resource))
        available = sorted(found)
        preferred: tuple[str, ...] | None = None
        chosen: list[str] = []
        if options.get_preferred_allocation_available:
            preferred = self._preferred(endpoint.stub, available, count)
            chosen = [device for device in dict.fromkeys(preferred) if device in found][:count]
        # Like the kubelet: ignore what is not a candidate, and top up a short answer by ourselves.
        chosen += [device for device in available if device not in chosen][: count - len(chosen)]
        response = self._allocate_rpc(endpoint.stub, chosen)
        if options.pre_start_required:
            self._pre_start(endpoint.stub, chosen)
        device_ids = tuple(chosen)
        return GrantedDevices(
            resource=resource,
            device_ids=device_ids,
            response=response,
            numa_nodes=self._state.numa_of(resource, device_ids),
            preferred=preferred,
        )

    def _preferred(self, stub: Any, available: list[str], count: int) -> tuple[str, ...]:
        request = deviceplugin_pb2.PreferredAllocationRequest(
            container_requests=[
                deviceplugin_pb2.ContainerPreferredAllocationRequest(
                    available_deviceIDs=available, must_include_deviceIDs=[], allocation_size=count
                )
            ]
        )
        try:
            answer = stub.GetPreferredAllocation(request, timeout=self._rpc_timeout_s)
        except grpc.RpcError as exc:
            raise _plugin_failure(errors.preferred_allocation_failed(go_status_text(exc)), exc) from exc
        if not answer.container_responses:
            return ()
        return tuple(answer.container_responses[0].deviceIDs)

    def _allocate_rpc(self, stub: Any, chosen: list[str]) -> deviceplugin_pb2.ContainerAllocateResponse:
        request = deviceplugin_pb2.AllocateRequest(
            container_requests=[deviceplugin_pb2.ContainerAllocateRequest(devices_ids=chosen)]
        )
        try:
            answer = stub.Allocate(request, timeout=self._rpc_timeout_s)
        except grpc.RpcError as exc:
            raise _plugin_failure(go_status_text(exc), exc) from exc
        if not answer.container_responses:
            raise errors.AdmissionFailure(errors.no_container_responses(f"&AllocateResponse{{{answer}}}"))
        # Only the first response is used; extras are ignored, as in the kubelet.
        first = deviceplugin_pb2.ContainerAllocateResponse()
        first.CopyFrom(answer.container_responses[0])
        return first

    def _pre_start(self, stub: Any, chosen: list[str]) -> None:
        request = deviceplugin_pb2.PreStartContainerRequest(devices_ids=chosen)
        try:
            stub.PreStartContainer(request, timeout=PRE_START_TIMEOUT_S)
        except grpc.RpcError as exc:
            raise _plugin_failure(errors.pre_start_failed(go_status_text(exc)), exc) from exc


def _plugin_failure(text: str, exc: grpc.RpcError) -> errors.AdmissionFailure:
    code = exc.code() if hasattr(exc, "code") else None
    details = exc.details() if hasattr(exc, "details") else None
    return errors.AdmissionFailure(text, code=code, details=details)
