"""What the served config needs on the node besides the servers: the CDI spec files and the MPS daemons."""

from __future__ import annotations

import logging
import threading

from gpuslice.allocation import AllocateOptions, MpsConfigError, daemon_settings
from gpuslice.allocation.cdi import CdiError
from gpuslice.allocation.cdi_specs import CdiSpecUpkeep
from gpuslice.config import Config
from gpuslice.discovery import Backend
from gpuslice.gpu import Node
from gpuslice.mps import MpsControl, MpsManager, MpsStartError
from gpuslice.plugin.compat import CompatError, CompatOptions, allocate_options, mps_manager, write_cdi_specs
from gpuslice.records import record
from gpuslice.sharing import SharingPlan

log = logging.getLogger("gpuslice.plugin")


@record
class ServedConfig:
    """What the plugin serves right now: the config and everything derived from it."""

    config: Config
    node: Node
    plan: SharingPlan
    allocate_options: AllocateOptions
    warnings: tuple[str, ...] = ()


def served_config(
    config: Config, node: Node, plan: SharingPlan, options: CompatOptions, nvidia_answers: bool = True
) -> ServedConfig:
    """The served state of a validated config; CompatError on a missing required IMEX channel or on more
    MPS replicas than a GPU's MPS server accepts (both refused before anything starts)."""
    for resource in plan.resources:
        if resource.sharing == "mps":
            try:
                daemon_settings(resource)
            except MpsConfigError as exc:
                raise CompatError(f"sharing.mps: {exc}") from exc
    allocate, warnings = allocate_options(config, options, nvidia_answers)
    return ServedConfig(config, node, plan, allocate, warnings)


def compat_options(backend: Backend, cdi_dir: str, mps_control_command: str | None) -> CompatOptions:
    """The node's CompatOptions: a backend with an imaginary /dev has every device node, real ones look."""
    command = CompatOptions.split_command(mps_control_command)
    if backend.assumes_device_nodes():
        return CompatOptions.for_fake_backend(cdi_dir, command)
    return CompatOptions(cdi_dir, command)


class NodeUpkeep:
    """Keeps the CDI spec files and the MPS daemons in step with the served config.

    `start(served)` writes the specs and starts the daemons before anything is served (as NVIDIA does);
    `apply(candidate)` moves them to a new config, or restores the old daemons and returns False;
    `stop()` quits the daemons and removes the spec files this process wrote (after the servers). All
    three are safe from any thread.
    """

    def __init__(self, options: CompatOptions, mps_control: MpsControl | None = None) -> None:
        self.options = options
        self._mps_control = mps_control
        self._cdi = CdiSpecUpkeep(options.cdi_dir)
        self._mps: MpsManager | None = None
        self._served: ServedConfig | None = None
        self._lock = threading.Lock()

    def start(self, served: ServedConfig) -> None:
        """Write the CDI spec and start the MPS daemons; raises CompatError or MpsStartError."""
        with self._lock:
            write_cdi_specs(self._cdi, served.config, served.allocate_options, served.node)
            self._mps = self._start_mps(served)
            self._served = served

    def apply(self, candidate: ServedConfig) -> bool:
        """Restart the MPS daemons if what they serve changed and rewrite the CDI spec; False (old daemons
        back) when either fails."""
        with self._lock:
            old = self._served
            mps_changed = old is None or _mps_view(old) != _mps_view(candidate)
            if mps_changed and self._mps is not None:
                self._mps.stop()
                self._mps = None
            try:
                if mps_changed:
                    self._mps = self._start_mps(candidate)
                write_cdi_specs(self._cdi, candidate.config, candidate.allocate_options, candidate.node)
            except (MpsStartError, CompatError) as exc:
                log.error("reload failed, still serving the previous config: %s", exc)
                if mps_changed and old is not None:
                    self._restore_mps(old)
                return False
            self._served = candidate
            return True

    def stop(self) -> None:
        """Quit the MPS daemons and remove our CDI specs. Idempotent; call after the servers are stopped."""
        with self._lock:
            if self._mps is not None:
                self._mps.stop()
                self._mps = None
            try:
                self._cdi.remove()
            except CdiError as exc:
                log.error("%s", exc)

    def _start_mps(self, served: ServedConfig) -> MpsManager | None:
        manager = mps_manager(served.config, served.plan, self.options, self._mps_control)
        if manager is not None:
            manager.start(served.plan.resources)
        return manager

    def _restore_mps(self, old: ServedConfig) -> None:
        try:
            self._mps = self._start_mps(old)
        except MpsStartError as exc:
            log.error("the previous MPS daemons could not be restarted either: %s", exc)


def _mps_view(served: ServedConfig) -> tuple[object, ...]:
    """What the MPS daemons depend on: the MPS resources (names and devices) and the root."""
    resources = tuple(r for r in served.plan.resources if r.sharing == "mps")
    return (served.config.flags.mps_root, resources)
