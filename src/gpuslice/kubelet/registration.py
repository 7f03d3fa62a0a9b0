"""The kubelet's `v1beta1.Registration` service: validate, dial the plugin back, read options, watch it."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Any

import grpc

from gpuslice.kubelet import errors
from gpuslice.kubelet.endpoint import DialTimeout, EndpointStopped, PluginEndpoint
from gpuslice.kubelet.gotext import go_status_text
from gpuslice.kubelet.names import is_extended_resource_name
from gpuslice.kubelet.state import KubeletState
from gpuslice.wire import API_VERSION, deviceplugin_grpc, deviceplugin_pb2

log = logging.getLogger("gpuslice.kubelet")

SUPPORTED_VERSIONS = (API_VERSION,)
DIAL_TIMEOUT_S = 10.0


def plugin_socket_path(directory: Path, endpoint: str) -> Path:
    """Go's filepath.Join(dir, endpoint): an absolute or `..` endpoint is joined, then cleaned."""
    return Path(os.path.normpath(f"{directory}/{endpoint}"))


class Registrar:
    """Runs `Register` the way the kubelet does; every dial in flight can be cancelled on stop/restart."""

    def __init__(self, state: KubeletState, directory: Path, dial_timeout_s: float = DIAL_TIMEOUT_S) -> None:
        self._state = state
        self._directory = directory
        self._dial_timeout_s = dial_timeout_s
        self._pending: set[PluginEndpoint] = set()
        self._closed = False
        self._lock = threading.Lock()

    def register(self, request: deviceplugin_pb2.RegisterRequest) -> None:
        """Raises RegistrationRefused with the kubelet's text; returns once the stream is started."""
        generation = self._state.generation
        resource = request.resource_name
        self._state.count_attempt(resource)
        if request.version not in SUPPORTED_VERSIONS:
            raise errors.RegistrationRefused(errors.unsupported_version(request.version, SUPPORTED_VERSIONS))
        if not is_extended_resource_name(resource):
            raise errors.RegistrationRefused(errors.invalid_resource_name(resource))
        endpoint = PluginEndpoint(resource, request.endpoint, plugin_socket_path(self._directory, request.endpoint))
        with self._lock:
            self._pending.add(endpoint)
            closed = self._closed
        if closed:
            endpoint.stop()  # the kubelet is going away: the dial below fails at once
        try:
            old = self._connect_and_install(endpoint, generation)
        except BaseException:
            endpoint.stop()
            raise
        finally:
            with self._lock:
                self._pending.discard(endpoint)
        if old is not None:
            old.stop()  # newest wins: the replaced plugin's stream is closed
        endpoint.start_stream(self._state.apply_list, self._state.stream_ended)

    def _connect_and_install(self, endpoint: PluginEndpoint, generation: int) -> PluginEndpoint | None:
        try:
            endpoint.dial(self._dial_timeout_s)
        except DialTimeout as exc:
            raise errors.RegistrationRefused(errors.dial_failed("context deadline exceeded")) from exc
        except EndpointStopped as exc:
            raise errors.RegistrationRefused(errors.dial_failed("context canceled")) from exc
        try:
            options = endpoint.get_options(self._dial_timeout_s)
        except grpc.RpcError as exc:
            raise errors.RegistrationRefused(errors.options_failed(go_status_text(exc))) from exc
        return self._state.install(endpoint, options, generation)

    def close(self) -> None:
        """Abort registrations still dialling and any that start from now on (kubelet stop or restart)."""
        with self._lock:
            self._closed = True
            pending = list(self._pending)
        for endpoint in pending:
            endpoint.stop()

    def reopen(self) -> None:
        with self._lock:
            self._closed = False


class RegistrationServicer(deviceplugin_grpc.RegistrationServicer):  # type: ignore[misc]
    """Plain Go errors reach the plugin as status UNKNOWN with the error text as the message."""

    def __init__(self, registrar: Registrar) -> None:
        self._registrar = registrar

    def Register(self, request: deviceplugin_pb2.RegisterRequest, context: Any) -> deviceplugin_pb2.Empty:  # noqa: N802 (gRPC method name)
        try:
            self._registrar.register(request)
        except errors.RegistrationRefused as exc:
            log.warning("registration of %s refused: %s", request.resource_name or "<empty>", exc)
            context.abort(grpc.StatusCode.UNKNOWN, str(exc))
        return deviceplugin_pb2.Empty()
