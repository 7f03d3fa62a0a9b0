"""`MockKubelet`: the device-manager side of a kubelet over real gRPC, for tests, the demo and `gpuslice kubelet`."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from gpuslice.kubelet import checkpoint
from gpuslice.kubelet.admission import Admitter
from gpuslice.kubelet.podresources import PodResourcesServicer
from gpuslice.kubelet.registration import DIAL_TIMEOUT_S, Registrar, RegistrationServicer
from gpuslice.kubelet.sockets import RunningServer, serve_unix, wipe_unix_sockets
from gpuslice.kubelet.state import KubeletState, Predicate
from gpuslice.kubelet.views import Admission, GrantedDevices, ResourceView
from gpuslice.wire import deviceplugin_grpc, deviceplugin_pb2, podresources_grpc

log = logging.getLogger("gpuslice.kubelet")

KUBELET_SOCKET_NAME = "kubelet.sock"
_RESTART_HOLD_NAME = ".kubelet.sock.restart-hold"
_REGISTRATION_WORKERS = 8
_POD_RESOURCES_WORKERS = 4


def default_pod_resources_socket(device_plugin_dir: str | Path) -> Path:
    """`<root>/pod-resources/kubelet.sock` beside a `<root>/device-plugins` dir, else `<dir>/pod-resources/...`.

    The first mirrors /var/lib/kubelet; the second keeps two mocks in sibling temp dirs apart.
    """
    directory = Path(device_plugin_dir).absolute()
    root = directory.parent if directory.name == "device-plugins" else directory
    return root / "pod-resources" / KUBELET_SOCKET_NAME


class MockKubelet:
    """Serves `v1beta1.Registration` on `<dir>/kubelet.sock` and pod-resources v1; admits pods.

    Not started by the constructor: call `start()` (returns self) or use it as a context manager.
    """

    def __init__(
        self,
        device_plugin_dir: str | Path,
        pod_resources_socket: str | Path | None = None,
        *,
        dial_timeout_s: float = DIAL_TIMEOUT_S,
        rpc_timeout_s: float | None = None,
        checkpoint_enabled: bool = True,
    ) -> None:
        self.device_plugin_dir = Path(device_plugin_dir).absolute()
        self.socket_path = self.device_plugin_dir / KUBELET_SOCKET_NAME
        self.pod_resources_socket = (
            Path(pod_resources_socket).absolute()
            if pod_resources_socket is not None
            else default_pod_resources_socket(self.device_plugin_dir)
        )
        self.checkpoint_path: Path | None = (
            self.device_plugin_dir / checkpoint.CHECKPOINT_FILE if checkpoint_enabled else None
        )
        self.restarts = 0
        self._state = KubeletState()
        self._registrar = Registrar(self._state, self.device_plugin_dir, dial_timeout_s)
        self._admitter = Admitter(self._state, rpc_timeout_s)
        self._lifecycle = threading.RLock()
        self._checkpoint_lock = threading.Lock()
        self._registration: RunningServer | None = None
        self._pod_resources: RunningServer | None = None
        self._checkpoint_loaded = False
        if self.checkpoint_path is not None:
            self._state.add_change_listener(self._write_checkpoint)

    # Lifecycle ---------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._registration is not None

    def start(self) -> Self:
        """Create the directory, wipe its sockets, read the checkpoint, then serve both APIs."""
        with self._lifecycle:
            if self.running:
                return self
            self.device_plugin_dir.mkdir(mode=0o750, parents=True, exist_ok=True)
            wipe_unix_sockets(self.device_plugin_dir, keep=[self.pod_resources_socket])
            self._load_checkpoint()
            self._pod_resources = serve_unix(
                self.pod_resources_socket, self._add_pod_resources, _POD_RESOURCES_WORKERS, "kubelet-podres"
            )
            self._start_registration()
            log.info("mock kubelet listening on %s (pod-resources %s)", self.socket_path, self.pod_resources_socket)
        return self

    def stop(self) -> None:
        """Stop both servers and every plugin connection; plugin sockets are left alone."""
        with self._lifecycle:
            if self._registration is not None:
                self._stop_registration()
            if self._pod_resources is not None:
                self._pod_resources.stop()
                self._pod_resources = None
            for endpoint in self._state.forget_endpoints():
                endpoint.stop()

    def restart(self) -> None:
        """Simulate a kubelet restart: every unix socket in the dir is wiped and kubelet.sock comes back.

        Resources stay known but with no devices (capacity and allocatable 0) until their plugin
        registers again; pods keep their devices. The new kubelet.sock always has a new inode: a hard
        link holds the old one while the new socket is bound, so inode-watching plugins see the change.
        """
        with self._lifecycle:
            if self._registration is None:
                raise RuntimeError("the mock kubelet is not running")
            hold = self.device_plugin_dir / _RESTART_HOLD_NAME
            try:
                os.link(self.socket_path, hold)
            except OSError:
                hold.unlink(missing_ok=True)
            self._stop_registration()
            for endpoint in self._state.forget_endpoints():
                endpoint.stop()
            wipe_unix_sockets(self.device_plugin_dir, keep=[hold, self.pod_resources_socket])
            self._start_registration()
            hold.unlink(missing_ok=True)
            self.restarts += 1
            log.info("mock kubelet restarted; plugins must register again")

    def _stop_registration(self) -> None:
        # Close first so a dial in flight is cancelled instead of outliving the server's grace period.
        self._registrar.close()
        if self._registration is not None:
            self._registration.stop(before_join=self._registrar.close)
            self._registration = None

    def _start_registration(self) -> None:
        self._registrar.reopen()
        self._registration = serve_unix(self.socket_path, self._add_registration, _REGISTRATION_WORKERS, "kubelet-grpc")

    def _add_registration(self, server: Any) -> None:
        servicer = RegistrationServicer(self._registrar)
        deviceplugin_grpc.add_RegistrationServicer_to_server(servicer, server)  # type: ignore[no-untyped-call]

    def _add_pod_resources(self, server: Any) -> None:
        servicer = PodResourcesServicer(self._state)
        podresources_grpc.add_PodResourcesListerServicer_to_server(servicer, server)  # type: ignore[no-untyped-call]

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()

    # Pods --------------------------------------------------------------------------------------

    def admit(
        self, pod: str, resources: Mapping[str, int], namespace: str = "default", container: str = "main"
    ) -> Admission:
        """Admit one container asking for `resources` (name -> count); raises AdmissionError if rejected."""
        return self._admitter.admit(pod, resources, namespace, container)

    def admit_one(
        self, pod: str, resource: str, count: int = 1, namespace: str = "default", container: str = "main"
    ) -> GrantedDevices:
        """`admit` for a single resource, returning just its allocation."""
        return self.admit(pod, {resource: count}, namespace, container).allocations[resource]

    def delete_pod(self, pod: str, namespace: str = "default") -> bool:
        """Free every device the pod holds; False if the pod held nothing."""
        removed = self._state.remove_pod((namespace, pod))
        if removed:
            log.info("deleted pod %s/%s", namespace, pod)
        return removed

    def admissions(self) -> list[Admission]:
        return self._state.admissions()

    # Queries -----------------------------------------------------------------------------------

    def resources(self) -> dict[str, ResourceView]:
        return self._state.views()

    def resource(self, name: str) -> ResourceView | None:
        return self._state.views().get(name)

    def registration_count(self, resource: str) -> int:
        """Successful registrations of `resource` (attempts are in `ResourceView.registration_attempts`)."""
        view = self.resource(resource)
        return view.registrations if view is not None else 0

    def last_list_and_watch(self, resource: str) -> deviceplugin_pb2.ListAndWatchResponse | None:
        return self._state.last_message(resource)

    def wait_for(
        self,
        predicate: Predicate | None = None,
        *,
        resource: str | None = None,
        registered: bool | None = None,
        capacity: int | None = None,
        allocatable: int | None = None,
        min_registrations: int | None = None,
        min_updates: int | None = None,
        timeout: float = 10.0,
    ) -> bool:
        """Block until the condition holds (True) or `timeout` seconds pass (False).

        Either a predicate over `resources()`, or keyword conditions on one `resource`, or both (all
        must hold). Woken by every state change; no polling.
        """
        conditions: list[Callable[[Mapping[str, ResourceView]], bool]] = []
        if predicate is not None:
            conditions.append(predicate)
        if resource is not None:
            conditions.append(
                lambda views: _matches(
                    views.get(resource), registered, capacity, allocatable, min_registrations, min_updates
                )
            )
        elif any(v is not None for v in (registered, capacity, allocatable, min_registrations, min_updates)):
            raise ValueError("keyword conditions need resource=")
        return self._state.wait_for(lambda views: all(check(views) for check in conditions), timeout)

    def plugin_stub(self, resource: str) -> Any:
        """The DevicePlugin stub on the kubelet's live connection to `resource`, for raw calls in tests."""
        endpoint, _ = self._state.endpoint_for(resource)
        if endpoint is None or not endpoint.usable:
            raise LookupError(f"no live device plugin registered for {resource}")
        return endpoint.stub

    # Checkpoint --------------------------------------------------------------------------------

    def _load_checkpoint(self) -> None:
        # Only the first start reads it: after that the in-memory record is the newer truth.
        if self.checkpoint_path is None or self._checkpoint_loaded:
            return
        self._checkpoint_loaded = True
        try:
            restored = checkpoint.read(self.checkpoint_path)
        except checkpoint.CheckpointError as exc:
            log.warning("ignoring checkpoint: %s", exc)
            restored = None
        if restored is not None:
            self._state.restore(restored)
            log.info("restored %d container allocations from the checkpoint", len(restored.containers))

    def _write_checkpoint(self) -> None:
        if self.checkpoint_path is None:
            return
        with self._checkpoint_lock:
            document = checkpoint.encode(self._state.admissions(), self._state.registered_healthy())
            try:
                checkpoint.write(self.checkpoint_path, document)
            except OSError as exc:
                log.warning("cannot write checkpoint %s: %s", self.checkpoint_path, exc)


def _matches(
    view: ResourceView | None,
    registered: bool | None,
    capacity: int | None,
    allocatable: int | None,
    min_registrations: int | None,
    min_updates: int | None,
) -> bool:
    if view is None:
        return False
    return (
        (registered is None or view.registered == registered)
        and (capacity is None or view.capacity == capacity)
        and (allocatable is None or view.allocatable == allocatable)
        and (min_registrations is None or view.registrations >= min_registrations)
        and (min_updates is None or view.updates >= min_updates)
    )
