"""The kubelet's failure texts, and the exceptions the mock raises with them."""

from __future__ import annotations

from collections.abc import Iterable

import grpc

from gpuslice.kubelet.gotext import go_quote, go_quote_list

UNEXPECTED_ADMISSION_ERROR = "UnexpectedAdmissionError"
CREATE_CONTAINER_CONFIG_ERROR = "CreateContainerConfigError"


class RegistrationRefused(Exception):
    """A `Register` call the kubelet refuses; the text is sent as gRPC status UNKNOWN."""


class AdmissionFailure(Exception):
    """One step of the allocation flow failed; `str()` is the kubelet's inner error text."""

    def __init__(self, text: str, *, code: grpc.StatusCode | None = None, details: str | None = None) -> None:
        super().__init__(text)
        self.code = code
        self.details = details


class AdmissionError(Exception):
    """A pod the mock kubelet rejected, with the pod status the real kubelet would show.

    `message` is the full status message (`Allocate failed due to <cause>, which is unexpected`),
    `cause` the inner error, `code`/`details` the plugin's gRPC status when a plugin RPC failed.
    """

    def __init__(
        self,
        *,
        pod: str,
        namespace: str,
        container: str,
        resource: str | None,
        failure: AdmissionFailure,
        reason: str = UNEXPECTED_ADMISSION_ERROR,
    ) -> None:
        self.pod = pod
        self.namespace = namespace
        self.container = container
        self.resource = resource
        self.reason = reason
        self.cause = str(failure)
        self.code = failure.code
        self.details = failure.details
        if reason == UNEXPECTED_ADMISSION_ERROR:
            self.message = f"Allocate failed due to {self.cause}, which is unexpected"
        else:
            self.message = self.cause
        super().__init__(self.message)


def unsupported_version(version: str, supported: Iterable[str]) -> str:
    return (
        f"requested API version {go_quote(version)} is not supported by kubelet. "
        f"Supported version is {go_quote_list(supported)}"
    )


def invalid_resource_name(name: str) -> str:
    return f"the ResourceName {go_quote(name)} is invalid"


def dial_failed(cause: str) -> str:
    return f"failed to dial device plugin: {cause}"


def options_failed(cause: str) -> str:
    return f"failed to get device plugin options: {cause}"


def unregistered(resource: str) -> str:
    return f"cannot allocate unregistered device {resource}"


def no_healthy_devices(resource: str) -> str:
    return f"no healthy devices present; cannot allocate unhealthy devices {resource}"


def not_enough_devices(resource: str, requested: int, available: int) -> str:
    return f"requested number of devices unavailable for {resource}. Requested: {requested}, Available: {available}"


def changed_request(pod_uid: str, container: str, resource: str, before: int, after: int) -> str:
    return (
        f"pod {go_quote(pod_uid)} container {go_quote(container)} changed request for resource "
        f"{go_quote(resource)} from {before} to {after}"
    )


def endpoint_stopped(resource: str) -> str:
    return f"endpoint {resource} has been stopped"


def preferred_allocation_failed(cause: str) -> str:
    return f"device plugin GetPreferredAllocation rpc failed with err: {cause}"


def no_container_responses(rendered_response: str) -> str:
    return f"no containers return in allocation response {rendered_response}"


def pre_start_failed(cause: str) -> str:
    return f"device plugin PreStartContainer rpc failed with err: {cause}"


def stream_ended(resource: str, cause: str) -> str:
    return f"listAndWatch ended unexpectedly for device plugin {resource} with error {cause}"
