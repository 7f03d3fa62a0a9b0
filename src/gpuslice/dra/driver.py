"""`GpuDriver`: the DRA plugin's driver half, the node's GPUs set up for claims (prepare / unprepare)."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, Unpack

from gpuslice.allocation.cdi import present_control_nodes
from gpuslice.allocation.cdi_driver import driver_edits
from gpuslice.allocation.cdi_specs import CdiSettings
from gpuslice.allocation.cdi_validate import edits_host_problems
from gpuslice.discovery import MigControl, TimeSliceControl
from gpuslice.discovery.driver_files import discover_driver_files
from gpuslice.dra.api import ResourceApi
from gpuslice.dra.cdi import write_base_spec
from gpuslice.dra.checkpoint import ClaimCheckpoint, PreparedDevice
from gpuslice.dra.claim_reads import ClaimReads
from gpuslice.dra.claims import ClaimRef
from gpuslice.dra.devices import DraDevice
from gpuslice.dra.mps import ClaimMpsDaemons
from gpuslice.dra.names import CHECKPOINT_NAME
from gpuslice.dra.prepare import PrepareParts, Preparer
from gpuslice.dra.settings import DraSettings
from gpuslice.dra.setup import DraSetup
from gpuslice.health import xid_policy_from_env
from gpuslice.health.loop import build_health_loop
from gpuslice.sharing import HealthStore

if TYPE_CHECKING:
    from gpuslice.mps import MpsControl

log = logging.getLogger("gpuslice.dra")


class HardwareControls(TypedDict, total=False):
    """What replaces the backend's controls and the MPS control program (tests, the demo)."""

    mig: MigControl
    mps_control: MpsControl
    timeslice: TimeSliceControl


class GpuDriver:
    """The node's GPUs as a ClaimDriver (dra.contract): its Preparer over what the backend can do.

    Set-up reads what the node offers once: the driver's files for the claims' CDI specs, the control
    nodes that exist, and the backend's MIG and time-slice controls; an MPS root makes MPS claims
    possible. The health loop is the device plugin's (same Xid policy); `health` is what the kubelet
    plumbing publishes from. `start()` resumes what an earlier process left prepared.
    """

    def __init__(
        self, setup: DraSetup, settings: DraSettings, api: ResourceApi, **given: Unpack[HardwareControls]
    ) -> None:
        self.setup = setup
        self.health = HealthStore(setup.node)
        self.health_loop = build_health_loop(
            setup.backend,
            setup.node,
            self.health,
            xid_policy_from_env(settings.environ),
            setup.config.gpuslice.health_recovery,
        )
        self._by_name = {device.name: device for device in setup.devices}
        mps_root = settings.mps_root or (Path(setup.config.flags.mps_root) if setup.config.flags.mps_root else None)
        mps = None
        if mps_root:
            from gpuslice.mps import CommandControl  # gpuslice.mps loads only on a node with an MPS root (dra.mps)

            control = given["mps_control"] if "mps_control" in given else CommandControl(settings.mps_control_command)
            mps = ClaimMpsDaemons(mps_root, control)
        cdi = CdiSettings.from_config(setup.config)
        files = discover_driver_files(cdi.driver.container_driver_root, setup.node.driver_version or None)
        for note in files.notes:
            log.warning("driver root %s: %s", cdi.driver.container_driver_root, note)
        missing = files.warning()
        if missing is not None:
            log.warning("%s; CDI containers may not start CUDA without them", missing)
        edits = driver_edits(files, cdi.driver)
        # What a runtime on the host would not find: a mount source, or the hook program (nvidia-ctk)
        for problem in edits_host_problems(edits, cdi.driver.roots(), "CDI driver edits", device_nodes=False):
            log.warning("%s", problem)
        self.shared_cdi_ids: tuple[str, ...] = ()  # the base spec's (dra.cdi), written at start
        self.parts = PrepareParts(
            cdi_dir=settings.cdi_dir,
            dev_root=cdi.dev_root,
            driver_edits=edits,
            # a backend with an imaginary /dev has every node; a real node lists only those the driver made
            control_nodes=present_control_nodes(
                (lambda _path: True) if setup.backend.assumes_device_nodes() else os.path.exists
            ),
            mig=given["mig"] if "mig" in given else setup.backend.mig_control(setup.node),
            placements=setup.plan.resources,
            mps=mps,
            timeslice=given["timeslice"] if "timeslice" in given else setup.backend.timeslice_control(),
        )
        # The claims of one kubelet call are read at once (dra.claim_reads), before preparing starts.
        self.reads = ClaimReads(api, self._prepared)
        self.preparer = Preparer(
            settings.driver,
            setup.node.name,
            lambda: self._by_name,
            lambda device: self.health.is_healthy(device.advertised),
            self.reads,
            ClaimCheckpoint(settings.plugin_dir / CHECKPOINT_NAME, setup.node.name),
            self.parts,
        )

    @property
    def devices(self) -> Sequence[DraDevice]:
        """Every device of the pool, healthy or not."""
        return self.setup.devices

    def prepare(self, ref: ClaimRef, budget_s: float) -> tuple[PreparedDevice, ...]:
        # Each device names the base spec too: the driver's hooks, once per container (dra.cdi)
        devices = self.preparer.prepare(ref, budget_s).devices
        return tuple(replace(d, cdi_ids=(*self.shared_cdi_ids, *d.cdi_ids)) for d in devices)

    def unprepare(self, ref: ClaimRef, budget_s: float) -> None:
        self.preparer.unprepare(ref, budget_s)

    def _prepared(self, uid: str) -> bool:
        return self.preparer.completed(uid)

    def start(self) -> None:
        """Write the base CDI spec, resume (roll back half-done claims, re-create lost MIG devices), then
        watch health."""
        self.shared_cdi_ids = write_base_spec(self.parts.cdi_dir, self.preparer.driver, self.parts.driver_edits)
        self.preparer.resume()
        self.health_loop.start()

    def stop(self) -> None:
        """Stop watching health and release the backend (NVML)."""
        self.health_loop.stop()
        self.setup.backend.close()
