"""`DraApp`: the one assembly of the DRA kubelet plugin (for the CLI, the demo and the tests)."""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import TYPE_CHECKING, Unpack

from gpuslice.dra.api import ResourceApi
from gpuslice.dra.contract import ClaimDriver
from gpuslice.dra.driver import GpuDriver, HardwareControls
from gpuslice.dra.health_service import ResourceHealthService
from gpuslice.dra.kubelet_plugin import KubeletPlugin
from gpuslice.dra.settings import DraSettings
from gpuslice.dra.setup import DraSetup
from gpuslice.dra.sockets import SocketError
from gpuslice.signal_loop import run_until_signalled

if TYPE_CHECKING:
    from gpuslice.dra.metrics import DraMetrics, PluginState
    from gpuslice.node.metrics_server import MetricsServer

DRA_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class DraApp:
    """The DRA plugin process: a GpuDriver (set-up, prepare, unprepare) served by a KubeletPlugin.

    `start()` resumes the driver (claims an earlier process left), then the plumbing serves, publishes
    and registers; `stop()` undoes it in reverse. `controls` (`mig`, `mps_control`, `timeslice`) replace
    what the backend and the flags would give (tests, the demo). With `settings.metrics_port`, the node
    core's metrics server answers /metrics (DraMetrics), /healthz and /readyz (the KubeletPlugin's probes)
    from before the first socket to after the last (the Prometheus client loads with the first scrape);
    without it no metrics are made.
    """

    def __init__(
        self, setup: DraSetup, settings: DraSettings, api: ResourceApi, **controls: Unpack[HardwareControls]
    ) -> None:
        self.setup = setup
        self.settings = settings
        self.api = api
        self.driver = GpuDriver(setup, settings, api, **controls)
        self.metrics: DraMetrics | None = None
        self.metrics_server: MetricsServer | None = None
        served: ClaimDriver = self.driver
        if settings.metrics_port is not None:
            from gpuslice.dra.metrics import DraMetrics, MeteredDriver
            from gpuslice.node.metrics_server import MetricsServer

            self.metrics = DraMetrics()
            served = MeteredDriver(self.driver, self.metrics)
        pool = ResourceHealthService(setup.node.name, setup.devices, self.driver.health)
        self.plugin = KubeletPlugin(settings, api, served, pool, self.driver.reads)
        if self.metrics is not None:
            self.metrics.watch(
                self._state, lambda: self.plugin.slices.counters.registry if self.plugin.slices else None
            )
            port = settings.metrics_port
            try:  # binds now: a busy port fails the start before anything is served
                self.metrics_server = MetricsServer(
                    self.metrics, port or 0, settings.metrics_address, self.plugin.alive, self.plugin.ready
                )
            except OSError as exc:
                raise SocketError(f"--metrics-port {port}: cannot listen: {exc.strerror or exc}") from exc

    def _state(self) -> PluginState:
        from gpuslice.dra.metrics import PluginState

        slices = self.plugin.slices
        return PluginState(
            publishes=slices.publishes if slices is not None else 0,
            publisher_restarts=self.plugin.publisher_restarts,
            published_devices=len(self.plugin.published_devices()),
            registered=self.plugin.registration.state.registered,
        )

    # Lifecycle ---------------------------------------------------------------------------------

    def start(self) -> None:
        """The driver first (resume, health), then the plumbing; on failure nothing stays up."""
        try:
            if self.metrics_server is not None:
                self.metrics_server.start()  # probes answer from the first second, as the device plugin's
            self.driver.start()
            self.plugin.start()
        except BaseException:
            self.stop(delete_slices=False)
            raise

    def stop(self, delete_slices: bool = True) -> None:
        """The plumbing first (the kubelet stops sending, slices go), then the driver, then the API client
        (a request still blocked on a silent API server ends now). Idempotent."""
        self.plugin.stop(delete_slices)
        self.driver.stop()
        self.driver.reads.close()
        if self.metrics_server is not None:
            self.metrics_server.stop()

    def run_until_signalled(self, ready: Callable[[], None] | None = None) -> signal.Signals:
        """Start, wait for SIGTERM or SIGINT, stop. Must run on the main thread."""
        return run_until_signalled(self, ready, stop_signals=DRA_STOP_SIGNALS)
