"""`DraApp`: the one assembly of the DRA kubelet plugin (for the CLI, the demo and the tests)."""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gpuslice.allocation.cdi import present_control_nodes
from gpuslice.allocation.cdi_driver import driver_edits
from gpuslice.allocation.cdi_specs import CdiSettings
from gpuslice.discovery import MigControl
from gpuslice.discovery.driver_files import discover_driver_files
from gpuslice.dra.api import ApiError, ResourceApi
from gpuslice.dra.checkpoint import ClaimCheckpoint
from gpuslice.dra.devices import DraDevice
from gpuslice.dra.health_service import ResourceHealthService, add_health_service
from gpuslice.dra.mps import ClaimMpsDaemons
from gpuslice.dra.names import (
    CHECKPOINT_NAME,
    DEFAULT_DRIVER,
    DEFAULT_KUBELET_ROOT,
    DRA_SOCKET_NAME,
    PLUGINS_DIR_NAME,
    REGISTRY_DIR_NAME,
    check_driver_name,
    plugin_dir,
    registration_socket,
)
from gpuslice.dra.prepare import PrepareParts, Preparer
from gpuslice.dra.publish import DEFAULT_RESYNC_S, SliceController
from gpuslice.dra.service import CALL_BUDGET_S, RegistrationService, add_node_services, add_registration_service
from gpuslice.dra.setup import DraSetup
from gpuslice.dra.slices import PoolSpec
from gpuslice.dra.sockets import UnixServer, serve
from gpuslice.dra.timeslice import NvidiaSmiTimeSlice, RecordingTimeSlice, TimeSliceControl
from gpuslice.health import xid_policy_from_env
from gpuslice.health.loop import build_health_loop
from gpuslice.mps import CommandControl, MpsControl
from gpuslice.sharing import HealthStore
from gpuslice.signal_loop import run_until_signalled

log = logging.getLogger("gpuslice.dra")

DRA_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
_NODE_WORKERS = 8
_REGISTRATION_WORKERS = 2
SOCKET_CHECK_S = 1.0


@dataclass(frozen=True)
class DraSettings:
    """Where the plugin lives and how it behaves; defaults are the production ones."""

    driver: str = DEFAULT_DRIVER
    registry_dir: Path = Path(DEFAULT_KUBELET_ROOT) / REGISTRY_DIR_NAME
    plugins_dir: Path = Path(DEFAULT_KUBELET_ROOT) / PLUGINS_DIR_NAME
    cdi_dir: Path = Path("/var/run/cdi")
    mps_root: Path | None = None
    mps_control_command: tuple[str, ...] = ("nvidia-cuda-mps-control",)
    resource_api_version: str = "auto"  # or v1 / v1beta2 / v1beta1
    resync_s: float = DEFAULT_RESYNC_S
    counter_layout: str = "auto"  # or combined / split; auto starts combined and splits if the server asks
    call_budget_s: float = CALL_BUDGET_S
    socket_check_s: float = SOCKET_CHECK_S
    environ: Mapping[str, str] = field(default_factory=dict)  # NVIDIA's health env vars (DP_DISABLE_HEALTHCHECKS, ...)

    def __post_init__(self) -> None:
        check_driver_name(self.driver)

    @property
    def registration_socket(self) -> Path:
        return registration_socket(self.registry_dir, self.driver)

    @property
    def plugin_dir(self) -> Path:
        return plugin_dir(self.plugins_dir, self.driver)

    @property
    def dra_socket(self) -> Path:
        return self.plugin_dir / DRA_SOCKET_NAME


def timeslice_for(setup: DraSetup) -> TimeSliceControl:
    """nvidia-smi on real GPUs; the fake backend's GPUs remember their level in memory."""
    return RecordingTimeSlice() if setup.backend.name == "fake" else NvidiaSmiTimeSlice()


class DraApp:
    """Node service + registration + slice publishing over one Preparer. `start()`, then `stop()`.

    Start order: resume prepared claims, serve dra.sock, offer the registration socket (the kubelet
    never reaches a plugin that cannot answer), then publish slices.
    """

    def __init__(
        self,
        setup: DraSetup,
        settings: DraSettings,
        api: ResourceApi,
        *,
        mig: MigControl | None = None,
        mps_control: MpsControl | None = None,
        timeslice: TimeSliceControl | None = None,
    ) -> None:
        self.setup = setup
        self.settings = settings
        self.api = api
        self.health = HealthStore(setup.node)
        # The device plugin's health loop and Xid policy: an unhealthy device leaves the pool.
        self.health_loop = build_health_loop(
            setup.backend,
            setup.node,
            self.health,
            xid_policy_from_env(settings.environ),
            setup.config.gpuslice.health_recovery,
        )
        self._by_name = {device.name: device for device in setup.devices}
        mps_root = settings.mps_root or (Path(setup.config.flags.mps_root) if setup.config.flags.mps_root else None)
        mps = (
            ClaimMpsDaemons(mps_root, mps_control or CommandControl(settings.mps_control_command)) if mps_root else None
        )
        cdi = CdiSettings.from_config(setup.config)
        files = discover_driver_files(cdi.driver.container_driver_root, setup.node.driver_version or None)
        for note in files.notes:
            log.warning("driver root %s: %s", cdi.driver.container_driver_root, note)
        missing = files.warning()
        if missing is not None:
            log.warning("%s; CDI containers may not start CUDA without them", missing)
        self.parts = PrepareParts(
            cdi_dir=settings.cdi_dir,
            dev_root=cdi.dev_root,
            driver_edits=driver_edits(files, cdi.driver),
            # a backend with an imaginary /dev has every node; a real node lists only those the driver made
            control_nodes=present_control_nodes(
                (lambda _path: True) if setup.backend.assumes_device_nodes() else os.path.exists
            ),
            mig=mig if mig is not None else setup.backend.mig_control(setup.node),
            mps=mps,
            timeslice=timeslice if timeslice is not None else timeslice_for(setup),
        )
        self.preparer = Preparer(
            settings.driver,
            setup.node.name,
            lambda: self._by_name,
            lambda device: self.health.is_healthy(device.advertised),
            api,
            ClaimCheckpoint(settings.plugin_dir / CHECKPOINT_NAME, setup.node.name),
            self.parts,
        )
        self.slices: SliceController | None = None
        self.health_service = ResourceHealthService(setup.node.name, setup.devices, self.health)
        self.registration = RegistrationService(settings.driver, str(settings.dra_socket), self._registered)
        self._node_server: UnixServer | None = None
        self._registration_server: UnixServer | None = None
        self._stop = threading.Event()
        self._watcher: threading.Thread | None = None
        self._remove_listener: Callable[[], None] | None = None

    # Devices -----------------------------------------------------------------------------------

    def published_devices(self) -> Sequence[DraDevice]:
        """The devices offered now: healthy ones only (an unhealthy device leaves the pool until it heals)."""
        return [device for device in self.setup.devices if self.health.is_healthy(device.advertised)]

    def pool_spec(self) -> PoolSpec:
        version = self.settings.resource_api_version
        if version == "auto":
            version = self.api.resource_version()
        layout = "combined" if self.settings.counter_layout == "auto" else self.settings.counter_layout
        return PoolSpec(self.settings.driver, self.setup.node.name, version, layout)

    # Lifecycle ---------------------------------------------------------------------------------

    def start(self) -> None:
        self.health_service.stopping.clear()
        self.preparer.resume()
        self._node_server = serve(
            self.settings.dra_socket,
            self._add_node_services,
            _NODE_WORKERS,
            "dra-node",
        )
        self.slices = SliceController(self.api, self.pool_spec, self.published_devices, self.settings.resync_s)
        self._remove_listener = self.health.add_listener(self.slices.poke)
        self.health_loop.start()
        # The node service answers and health is watched from here on, so the kubelet may register us now;
        # the first publish (the API client's making and its round trips: most of a start) follows, and
        # every registration pokes the slices again (a starting kubelet deletes the node's slices).
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
            len(self.setup.devices),
        )

    def _add_node_services(self, server: object) -> None:
        add_node_services(server, self.preparer, self.settings.call_budget_s)
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
        self.health_loop.stop()
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

    def run_until_signalled(self, ready: Callable[[], None] | None = None) -> signal.Signals:
        """Start, wait for SIGTERM or SIGINT, stop. Must run on the main thread."""
        return run_until_signalled(self, ready, stop_signals=DRA_STOP_SIGNALS)
