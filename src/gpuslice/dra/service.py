"""The gRPC side: the kubelet's DRA node service (v1 and v1beta1, one implementation) and plugin registration."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc

from gpuslice.dra.claim_reads import ClaimReads
from gpuslice.dra.claims import ClaimPrepareError, ClaimRef
from gpuslice.dra.contract import ClaimDriver
from gpuslice.dra.names import DRA_SUPPORTED_VERSIONS, PLUGIN_TYPE
from gpuslice.wire import dra_v1_grpc, dra_v1_pb2, dra_v1beta1_grpc, dra_v1beta1_pb2, pluginregistration_grpc
from gpuslice.wire import pluginregistration_pb2 as registration_pb2

log = logging.getLogger("gpuslice.dra")

# The kubelet gives each call 45 s; we answer well inside that, so our per-claim error reaches it.
CALL_BUDGET_S = 30.0
ANSWER_MARGIN_S = 2.0
MAX_CLAIMS_PER_CALL = 256  # a pod has at most 32 claims; more in one call is not a kubelet
MAX_FIELD_LENGTH = 253


def _budget(context: Any, limit_s: float) -> float:
    remaining = context.time_remaining()
    if remaining is None:
        return limit_s
    return max(0.0, min(limit_s, float(remaining) - ANSWER_MARGIN_S))


def _refs(request: Any, context: Any) -> list[ClaimRef]:
    if len(request.claims) > MAX_CLAIMS_PER_CALL:
        context.abort(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"{len(request.claims)} claims in one call; at most {MAX_CLAIMS_PER_CALL} are accepted",
        )
    refs = []
    for claim in request.claims:
        # Oversized fields are cut for the reply; ClaimRef.check refuses them with a per-claim error.
        refs.append(ClaimRef(claim.namespace[: MAX_FIELD_LENGTH + 1], claim.name[: MAX_FIELD_LENGTH + 1], claim.uid))
    return refs


class NodeService:
    """NodePrepareResources / NodeUnprepareResources over a ClaimDriver; `pb` is the version's message module.

    Every requested claim UID gets exactly one entry; a claim's failure is its own entry's error and
    never fails the call, so one bad claim cannot stop the others.
    """

    def __init__(
        self, driver: ClaimDriver, pb: Any, budget_s: float = CALL_BUDGET_S, reads: ClaimReads | None = None
    ) -> None:
        self.driver = driver
        self.pb = pb
        self.budget_s = budget_s
        self.reads = reads

    def NodePrepareResources(self, request: Any, context: Any) -> Any:  # noqa: N802 (gRPC method name)
        end = time.monotonic() + _budget(context, self.budget_s)
        refs = _refs(request, context)
        if self.reads is None:
            return self._prepare_all(refs, end)
        # Read every claim at once (each with its own deadline); half the budget is left to prepare.
        self.reads.prefetch(refs, (end - time.monotonic()) / 2)
        try:
            return self._prepare_all(refs, end)
        finally:
            self.reads.done()

    def _prepare_all(self, refs: list[ClaimRef], end: float) -> Any:
        response = self.pb.NodePrepareResourcesResponse()
        for ref in refs:
            entry = response.claims[ref.uid[:MAX_FIELD_LENGTH]]
            try:
                devices = self.driver.prepare(ref, end - time.monotonic())
            except ClaimPrepareError as exc:
                entry.error = str(exc)
                log.warning("prepare %s: %s", ref.uid[:64], exc)
                continue
            except Exception as exc:  # a bug must cost one claim, not the plugin
                entry.error = f"claim {ref}: internal error: {type(exc).__name__}: {exc}"
                log.exception("prepare %s failed", ref.uid[:64])
                continue
            for device in devices:
                entry.devices.add(
                    request_names=list(device.requests),
                    pool_name=device.pool,
                    device_name=device.device,
                    cdi_device_ids=list(device.cdi_ids),
                )
        return response

    def NodeUnprepareResources(self, request: Any, context: Any) -> Any:  # noqa: N802 (gRPC method name)
        end = time.monotonic() + _budget(context, self.budget_s)
        response = self.pb.NodeUnprepareResourcesResponse()
        for ref in _refs(request, context):
            entry = response.claims[ref.uid[:MAX_FIELD_LENGTH]]
            try:
                self.driver.unprepare(ref, end - time.monotonic())
            except ClaimPrepareError as exc:
                entry.error = str(exc)
                log.warning("unprepare %s: %s", ref.uid[:64], exc)
            except Exception as exc:  # a bug must cost one claim, not the plugin
                entry.error = f"claim {ref}: internal error: {type(exc).__name__}: {exc}"
                log.exception("unprepare %s failed", ref.uid[:64])
        return response


def add_node_services(
    server: Any, driver: ClaimDriver, budget_s: float = CALL_BUDGET_S, reads: ClaimReads | None = None
) -> None:
    """Both versions on one server: a 1.32 kubelet calls v1beta1, 1.34+ calls v1. With `reads`, the claims
    of each prepare call are read from the API server at once before the driver prepares them."""
    v1 = NodeService(driver, dra_v1_pb2, budget_s, reads)
    v1beta1 = NodeService(driver, dra_v1beta1_pb2, budget_s, reads)
    dra_v1_grpc.add_DRAPluginServicer_to_server(v1, server)  # type: ignore[no-untyped-call]
    dra_v1beta1_grpc.add_DRAPluginServicer_to_server(v1beta1, server)  # type: ignore[no-untyped-call]


@dataclass
class RegistrationState:
    """What the kubelet last told us."""

    registered: bool = False
    error: str = ""
    info_calls: int = 0
    notifications: int = 0


class RegistrationService:
    """pluginregistration.Registration: GetInfo names us; NotifyRegistrationStatus reports the verdict.

    `on_registered` runs after each successful registration (a restarted kubelet wipes our slices).
    """

    def __init__(self, driver: str, endpoint: str, on_registered: Callable[[], None]) -> None:
        self.driver = driver
        self.endpoint = endpoint
        self.on_registered = on_registered
        self.state = RegistrationState()
        self._lock = threading.Lock()
        self.changed = threading.Condition(self._lock)

    def GetInfo(self, request: Any, context: Any) -> Any:  # noqa: N802 (gRPC method name)
        with self._lock:
            self.state.info_calls += 1
        return registration_pb2.PluginInfo(
            type=PLUGIN_TYPE, name=self.driver, endpoint=self.endpoint, supported_versions=list(DRA_SUPPORTED_VERSIONS)
        )

    def NotifyRegistrationStatus(self, request: Any, context: Any) -> Any:  # noqa: N802 (gRPC method name)
        with self.changed:
            self.state.registered = request.plugin_registered
            self.state.error = request.error[:1024]
            self.state.notifications += 1
            self.changed.notify_all()
        if request.plugin_registered:
            log.info("registered with the kubelet as DRA driver %s", self.driver)
            self.on_registered()
        else:
            log.error("the kubelet refused the registration: %s", request.error[:1024])
        return registration_pb2.RegistrationStatusResponse()


def add_registration_service(server: Any, service: RegistrationService) -> None:
    pluginregistration_grpc.add_RegistrationServicer_to_server(service, server)  # type: ignore[no-untyped-call]
