"""`DraApp`: the one assembly of the DRA kubelet plugin (for the CLI, the demo and the tests)."""

from __future__ import annotations

import signal
from collections.abc import Callable, Sequence
from typing import Unpack

from gpuslice.dra.api import ResourceApi
from gpuslice.dra.devices import DraDevice
from gpuslice.dra.driver import GpuDriver, HardwareControls
from gpuslice.dra.kubelet_plugin import KubeletPlugin
from gpuslice.dra.prepare import PrepareParts, Preparer
from gpuslice.dra.publish import SliceController
from gpuslice.dra.settings import DraSettings
from gpuslice.dra.setup import DraSetup
from gpuslice.dra.slices import PoolSpec
from gpuslice.sharing import HealthStore
from gpuslice.signal_loop import run_until_signalled

DRA_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class DraApp:
    """The DRA plugin process: a GpuDriver (set-up, prepare, unprepare) served by a KubeletPlugin.

    `start()` resumes the driver (claims an earlier process left), then the plumbing serves, publishes
    and registers; `stop()` undoes it in reverse. `controls` (`mig`, `mps_control`, `timeslice`) replace
    what the backend and the flags would give (tests, the demo).
    """

    def __init__(
        self, setup: DraSetup, settings: DraSettings, api: ResourceApi, **controls: Unpack[HardwareControls]
    ) -> None:
        self.setup = setup
        self.settings = settings
        self.api = api
        self.driver = GpuDriver(setup, settings, api, **controls)
        self.plugin = KubeletPlugin(
            settings, api, self.driver, setup.node.name, setup.devices, self.driver.health, self.driver.reads
        )

    # What tests and the demo look at ---------------------------------------------------------------

    @property
    def health(self) -> HealthStore:
        return self.driver.health

    @property
    def parts(self) -> PrepareParts:
        return self.driver.parts

    @property
    def preparer(self) -> Preparer:
        return self.driver.preparer

    @property
    def slices(self) -> SliceController | None:
        return self.plugin.slices

    def published_devices(self) -> Sequence[DraDevice]:
        return self.plugin.published_devices()

    def pool_spec(self) -> PoolSpec:
        return self.plugin.pool_spec()

    # Lifecycle ---------------------------------------------------------------------------------

    def start(self) -> None:
        """The driver first (resume, health), then the plumbing; on failure nothing stays up."""
        try:
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

    def run_until_signalled(self, ready: Callable[[], None] | None = None) -> signal.Signals:
        """Start, wait for SIGTERM or SIGINT, stop. Must run on the main thread."""
        return run_until_signalled(self, ready, stop_signals=DRA_STOP_SIGNALS)
