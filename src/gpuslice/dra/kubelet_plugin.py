"""`KubeletPlugin`: the kubelet half of the DRA plugin (sockets, registration, slices, health) over a ClaimDriver."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from gpuslice.dra.api import ApiError, ResourceApi
from gpuslice.dra.contract import ClaimDriver
from gpuslice.dra.devices import DraDevice
from gpuslice.dra.health_service import ResourceHealthService, add_health_service
from gpuslice.dra.publish import SliceController
from gpuslice.dra.service import RegistrationService, add_node_services, add_registration_service
from gpuslice.dra.settings import DraSettings
from gpuslice.dra.slices import PoolSpec
from gpuslice.dra.sockets import UnixServer, serve
from gpuslice.sharing import HealthStore

log = logging.getLogger("gpuslice.dra")

_NODE_WORKERS = 8
_REGISTRATION_WORKERS = 2


class KubeletPlugin:
    """Serves a ClaimDriver to the kubelet, as the kubelet's own DRA helper library does for Go drivers.

    It owns what every DRA driver needs alike: the DRA node service (v1 and v1beta1) and the health
    stream on dra.sock, the registration socket (served again if it vanishes), and the node's
    ResourceSlices, which list the pool's healthy devices and are republished when health changes or
    the kubelet registers us again. It knows nothing of GPUs: the driver prepares, and `health` says
    which of `devices` are offered.

    Start order: dra.sock, then the registration socket (the kubelet never reaches a plugin that cannot
    answer), then the first publish of the slices. Stop: registration first (the kubelet stops sending), then
    dra.sock, then the slices are deleted.
    """

    def __init__(
        self,
        settings: DraSettings,
        api: ResourceApi,
        driver: ClaimDriver,
        pool_name: str,
        devices: Sequence[DraDevice],
        health: HealthStore,
    ) -> None:
        self.settings = settings
        self.api = api
        self.driver = driver
        self.pool_name = pool_name
        self.devices = devices
        self.health = health
        self.health_service = ResourceHealthService(pool_name, devices, health)
        self.registration = RegistrationService(settings.driver, str(settings.dra_socket), self._registered)
        self.slices: SliceController | None = None
        self._node_server: UnixServer | None = None
        self._registration_server: UnixServer | None = None
        self._stop = threading.Event()
        self._watcher: threading.Thread | None = None
        self._remove_listener: Callable[[], None] | None = None

    def published_devices(self) -> Sequence[DraDevice]:
        """The devices offered now: healthy ones only (an unhealthy device leaves the pool until it heals)."""
        return [device for device in self.devices if self.health.is_healthy(device.advertised)]

    def pool_spec(self) -> PoolSpec:
        version = self.settings.resource_api_version
        if version == "auto":
            version = self.api.resource_version()
        layout = "combined" if self.settings.counter_layout == "auto" else self.settings.counter_layout
        return PoolSpec(self.settings.driver, self.pool_name, version, layout)

    def start(self) -> None:
        self.health_service.stopping.clear()
        self._node_server = serve(self.settings.dra_socket, self._add_node_services, _NODE_WORKERS, "dra-node")
        self.slices = SliceController(self.api, self.pool_spec, self.published_devices, self.settings.resync_s)
        self._remove_listener = self.health.add_listener(self.slices.poke)
        # The node service answers (and the driver watches health) from here on, so the kubelet may register
        # us now; the first publish (the API client's making and its round trips: most of a start) follows,
        # and every registration pokes the slices again (a starting kubelet deletes the node's slices).
        self._serve_registration()
        try:
            self.slices.sync()
        except ApiError as exc:
            log.warning("first publish of ResourceSlices failed (will retry): %s", exc)
        self.slices.start()
        self._stop.clear()
        self._watcher = threading.Thread(target=self._watch_socket, name="dra-reg-watch", daemon=True)
        self._watcher.start()
        log.info(
            "DRA driver %s serving %s (registration %s), %d device(s)",
            self.settings.driver,
            self.settings.dra_socket,
            self.settings.registration_socket,
            len(self.devices),
        )

    def _add_node_services(self, server: Any) -> None:
        add_node_services(server, self.driver, self.settings.call_budget_s)
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
        # reinstall) we put it back, and the plugin watcher registers us again.
        while not self._stop.wait(self.settings.socket_check_s):
            server = self._registration_server
            if server is not None and not server.socket_present():
                log.warning("registration socket %s disappeared; serving it again", server.path)
                server.stop()
                self._serve_registration()

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
                try:
                    self.slices.delete_all()
                except ApiError as exc:
                    log.warning("could not delete our ResourceSlices: %s", exc)
