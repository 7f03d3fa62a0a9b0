"""One gRPC server on one Unix socket for one resource: serve, dial ourselves, register, stop cleanly."""

from __future__ import annotations

import logging
import os
import socket
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc

from gpuslice.fsutil.sockets import remove_own_socket, remove_stale_socket, socket_inode
from gpuslice.plugin.naming import socket_name
from gpuslice.plugin.service import SERVICE_NAME, ResourceService
from gpuslice.wire import API_VERSION, SOCKET_PATH_MAX, deviceplugin_grpc, deviceplugin_pb2, server_options

log = logging.getLogger("gpuslice.plugin")

# Workers for unary RPCs (Allocate, GetPreferredAllocation, the kubelet's dial-back during Register).
# Each open ListAndWatch pins a worker of the synchronous server, so the pool holds these plus one per
# stream the service may hold (rpc_limits.StreamSlots.max_threads: the cap, and the registration window's
# room for the kubelet's stream): streams can never take the unary share.
# ThreadPoolExecutor creates threads lazily, so a generous pool costs nothing while idle.
DEFAULT_WORKERS = 16
SELF_DIAL_TIMEOUT_S = 5.0
REGISTER_TIMEOUT_S = 15.0  # the kubelet may take up to 10 s dialling us back during Register
STOP_GRACE_S = 1.0


class PluginStartError(RuntimeError):
    """A server could not listen on, or be reached through, its socket."""


class RegistrationError(RuntimeError):
    """The kubelet refused (or could not be reached for) a registration; the message says which."""


class ResourceServer:
    """Serves a ResourceService on `<socket_dir>/<socket_name(resource)>`."""

    def __init__(self, service: ResourceService, socket_dir: Path, workers: int = DEFAULT_WORKERS) -> None:
        self.service = service
        self.socket_path = Path(socket_dir) / socket_name(service.resource.name)
        self._workers = workers
        self._server: Any = None
        self._executor: ThreadPoolExecutor | None = None
        self._inode: int | None = None

    @property
    def resource_name(self) -> str:
        return self.service.resource.name

    @property
    def endpoint(self) -> str:
        """What Register carries: the bare socket file name, relative to the kubelet's directory."""
        return self.socket_path.name

    @property
    def max_workers(self) -> int:
        """The thread pool: the unary workers, and a thread for every stream the service may hold."""
        return self._workers + self.service.streams.max_threads

    @property
    def serving(self) -> bool:
        return self._server is not None

    def start(self) -> None:
        """Listen (replacing a stale socket), start serving, and prove the socket listens by connecting to it."""
        path = self.socket_path
        if len(os.fsencode(path)) > SOCKET_PATH_MAX:
            raise PluginStartError(f"socket path {path} is longer than {SOCKET_PATH_MAX} bytes")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            remove_stale_socket(path)
        except OSError as exc:  # e.g. not root and the kubelet's directory: say so, no traceback
            raise PluginStartError(
                f"{self.resource_name}: cannot use the socket directory {path.parent}: {exc.strerror or exc}; "
                "give a writable one with --socket-dir"
            ) from exc
        executor = ThreadPoolExecutor(max_workers=self.max_workers, thread_name_prefix=f"gpuslice-{path.stem}")
        server = grpc.server(executor, options=server_options())
        handlers = self.service.method_handlers()
        # registered methods are matched by gRPC's core; the generic handler answers the same by name
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE_NAME, handlers),))
        server.add_registered_method_handlers(SERVICE_NAME, handlers)
        try:
            bound = server.add_insecure_port(f"unix:{path}")
        except RuntimeError as exc:
            bound = 0
            log.error("cannot listen on %s: %s", path, exc)
        if not bound:
            executor.shutdown(wait=False)
            raise PluginStartError(f"{self.resource_name}: cannot listen on unix socket {path}")
        server.start()
        self._server, self._executor = server, executor
        self._inode = socket_inode(path)
        # Proof that the socket listens: a plain connect to it. It fails at once if the socket was wiped under
        # us (the kubelet's directory) or is not ours to reach, and costs microseconds, where a first gRPC
        # channel and RPC cost 4-8 ms of every start. That the server answers RPCs is proved by the kubelet
        # itself: it dials us back before it accepts a Register.
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
                probe.settimeout(SELF_DIAL_TIMEOUT_S)
                probe.connect(os.fsencode(path))
        except OSError as exc:
            self.stop()
            raise PluginStartError(
                f"{self.resource_name}: serving on {path} but cannot connect to it: {exc.strerror or exc}"
            ) from exc
        log.info("serving %s on %s", self.resource_name, path)

    def register(self, kubelet_socket: Path, timeout_s: float = REGISTER_TIMEOUT_S) -> None:
        """Register with the kubelet (version v1beta1, endpoint = socket file name)."""
        request = deviceplugin_pb2.RegisterRequest(
            version=API_VERSION,
            endpoint=self.endpoint,
            resource_name=self.resource_name,
            options=deviceplugin_pb2.DevicePluginOptions(get_preferred_allocation_available=True),
        )
        try:
            # The registration window: the kubelet's stream, opened as Register dials us back, gets a slot.
            with self.service.streams.registration(), grpc.insecure_channel(f"unix:{kubelet_socket}") as channel:
                stub = deviceplugin_grpc.RegistrationStub(channel)  # type: ignore[no-untyped-call]
                stub.Register(request, timeout=timeout_s, wait_for_ready=False)
        except grpc.RpcError as exc:
            code = exc.code().name if exc.code() is not None else "UNKNOWN"
            raise RegistrationError(
                f"{self.resource_name}: registration with the kubelet at {kubelet_socket} failed ({code}): "
                f"{exc.details()}"
            ) from exc
        log.info(
            "registered %s with the kubelet at %s (endpoint %s)", self.resource_name, kubelet_socket, self.endpoint
        )

    def stop(self) -> None:
        """End open streams, stop serving, wait for handlers, and remove our socket file."""
        self.service.close()
        server, executor = self._server, self._executor
        self._server = self._executor = None
        if server is not None:
            server.stop(STOP_GRACE_S).wait()
        if executor is not None:
            executor.shutdown(wait=True)
        remove_own_socket(self.socket_path, self._inode)
        self._inode = None
