"""`KubeletPlugin`: the kubelet half of the DRA plugin (sockets, registration, slices, health) over a ClaimDriver."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from gpuslice.dra.api import ApiError, ResourceApi
from gpuslice.dra.claim_reads import ClaimReads
from gpuslice.dra.contract import ClaimDriver
from gpuslice.dra.devices import DraDevice
from gpuslice.dra.health_service import ResourceHealthService, add_health_service
from gpuslice.dra.publish import SliceController
from gpuslice.dra.service import RegistrationService, add_node_services, add_registration_service
from gpuslice.dra.settings import DraSettings
from gpuslice.dra.slices import PoolSpec
from gpuslice.dra.sockets import UnixServer, serve

log = logging.getLogger("gpuslice.dra")

NODE_WORKERS = 8
_REGISTRATION_WORKERS = 2
UNPUBLISH_WAIT_S = 0.8  # at stop: SIGTERM must end the process within 2 s whatever the API server does
# The first publish waits at most this for the kubelet's registration (a kubelet registers a new socket within
# milliseconds): its first sync loads the API client (gpuslice.kube, lightkube, httpx), which would take the
# CPU from the registration handshake on the same cores.
FIRST_PUBLISH_WAIT_S = 0.5


class KubeletPlugin:
    """Serves a ClaimDriver to the kubelet, as the kubelet's own DRA helper library does for Go drivers.

    It owns what every DRA driver needs alike: the DRA node service (v1 and v1beta1) and the health
    stream on dra.sock, the registration socket (served again if it vanishes), and the node's
    ResourceSlices, which list the pool's healthy devices and are republished when health changes or
    the kubelet registers us again. It knows nothing of GPUs: the driver prepares, and the pool (a
    ResourceHealthService: its name, devices and their health) says which devices are offered.

    Start order: dra.sock, then the registration socket, so the kubelet never reaches a plugin that cannot
    answer yet, then slice publishing (on a thread of its own: the start never waits for the API server),
    whose first sync waits for the kubelet's registration, at most FIRST_PUBLISH_WAIT_S. A publishing
    thread that dies is started again, at once. Stop: registration first (the kubelet stops
    sending), then dra.sock, then the slices are deleted, waiting at most UNPUBLISH_WAIT_S for the API.
    `reads`, when given, reads the claims of each prepare call at once (dra.claim_reads).
    """

    def __init__(
        self,
        settings: DraSettings,
        api: ResourceApi,
        driver: ClaimDriver,
        pool: ResourceHealthService,
        reads: ClaimReads | None = None,
    ) -> None:
        self.settings, self.api, self.driver, self.reads = settings, api, driver, reads
        # the pool (its name, devices and their health) is the health service's; the plumbing reads it there
        self.health_service = pool
        self.registration = RegistrationService(settings.driver, str(settings.dra_socket), self._registered)
        self.slices: SliceController | None = None
        self._node_server: UnixServer | None = None
        self._registration_server: UnixServer | None = None
        self._stop = threading.Event()
        self._watcher: threading.Thread | None = None
        self._remove_listener: Callable[[], None] | None = None
        self.publisher_restarts = 0

    def published_devices(self) -> Sequence[DraDevice]:
        """The devices offered now: healthy ones only (an unhealthy device leaves the pool until it heals)."""
        health = self.health_service.store
        return [device for device in self.health_service.devices if health.is_healthy(device.advertised)]

    def pool_spec(self) -> PoolSpec:
        version = self.settings.resource_api_version
        if version == "auto":
            version = self.api.resource_version()
        layout = "combined" if self.settings.counter_layout == "auto" else self.settings.counter_layout
        return PoolSpec(self.settings.driver, self.health_service.pool, version, layout)

    def start(self) -> None:
        self.health_service.stopping.clear()
        self._node_server = serve(self.settings.dra_socket, self._add_node_services, NODE_WORKERS, "dra-node")
        self.slices = SliceController(self.api, self.pool_spec, self.published_devices, self.settings.resync_s)
        self._remove_listener = self.health_service.store.add_listener(self.slices.poke)
        self._serve_registration()
        self.slices.start(FIRST_PUBLISH_WAIT_S)  # after: registering need not wait for the API client
        self._stop.clear()
        self._watcher = threading.Thread(target=self._watch_socket, name="dra-reg-watch", daemon=True)
        self._watcher.start()
        log.info(
            "DRA driver %s serving %s (registration %s), %d device(s)",
            self.settings.driver,
            self.settings.dra_socket,
            self.settings.registration_socket,
            len(self.health_service.devices),
        )

    def _add_node_services(self, server: Any) -> None:
        add_node_services(server, self.driver, self.settings.call_budget_s, self.reads)
        add_health_service(server, self.health_service)

    def _serve_registration(self) -> None:
        self._registration_server = serve(
            self.settings.registration_socket,
            lambda server: add_registration_service(server, self.registration),
            _REGISTRATION_WORKERS,
            "dra-reg",
        )

    def _watch_socket(self) -> None:
        # The kubelet finds plugins by their registration socket; if it vanished (a cleanup, a kubelet
        # reinstall) we put it back, and the plugin watcher registers us again. A publishing thread that
        # died is started again: without it the node's devices would vanish from the scheduler for good.
        while not self._stop.wait(self.settings.socket_check_s):
            if self.slices is not None and not self.slices.alive:
                log.error("the ResourceSlice publisher stopped; starting it again")
                self.publisher_restarts += 1
                self.slices.start()
            server = self._registration_server
            if server is not None and not server.socket_present():
                log.warning("registration socket %s disappeared; serving it again", server.path)
                server.stop()
                self._serve_registration()

    def alive(self) -> tuple[bool, str]:
        """/healthz: red while a thread that must run does not (the publisher, the socket watcher that
        restarts it) or while a socket the kubelet finds us by is gone (each is put back within
        `socket_check_s` but dra.sock, so a lasting red has the kubelet restart the container)."""
        if self._stop.is_set() or self._node_server is None:
            return True, "not serving (starting or stopping)"
        if self._watcher is not None and not self._watcher.is_alive():
            return False, "the registration socket watcher stopped"
        if self.slices is not None and not self.slices.alive:
            return False, "the ResourceSlice publisher stopped"
        if not self._node_server.socket_present():
            return False, f"DRA socket {self._node_server.path} is gone"
        registration = self._registration_server
        if registration is None or not registration.socket_present():
            return False, f"registration socket {self.settings.registration_socket} is gone"
        return True, "ok"

    def ready(self) -> tuple[bool, str]:
        """/readyz: registered with the kubelet, and the pool's slices synced once."""
        if self._stop.is_set() or self._node_server is None:
            return False, "not serving"
        if not self.registration.state.registered:
            return False, f"not registered with the kubelet (socket {self.settings.registration_socket})"
        if self.slices is None or not self.slices.wait_synced(0):
            return False, "ResourceSlices not published yet"
        return True, "ok"

    def _registered(self) -> None:
        if self.slices is not None:
            self.slices.poke()  # a restarted kubelet wiped the node's slices

    def stop(self, delete_slices: bool = True) -> None:
        """Stop registration first (the kubelet stops sending), then the node service, then unpublish."""
        self._stop.set()
        if self._watcher is not None:
            self._watcher.join(timeout=5)
            self._watcher = None
        if self._registration_server is not None:
            self._registration_server.stop()
            self._registration_server = None
        self.health_service.stopping.set()  # health streams end, so the server stops within its grace
        if self._node_server is not None:
            self._node_server.stop()
            self._node_server = None
        if self._remove_listener is not None:
            self._remove_listener()
            self._remove_listener = None
        if self.slices is not None:
            self.slices.stop()
            if delete_slices:
                _unpublish(self.slices)


def _unpublish(slices: SliceController) -> None:
    """Delete our slices, waiting at most UNPUBLISH_WAIT_S (the scheduler drops a dead node's later)."""

    def delete() -> None:
        try:
            slices.delete_all()
        except ApiError as exc:
            log.warning("could not delete our ResourceSlices: %s", exc)

    worker = threading.Thread(target=delete, name="dra-unpublish", daemon=True)
    worker.start()
    worker.join(UNPUBLISH_WAIT_S)
    if worker.is_alive():
        log.warning("the API server did not answer within %g s; leaving our ResourceSlices", UNPUBLISH_WAIT_S)
