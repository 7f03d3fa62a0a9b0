"""SIGHUP: re-read the config; a valid one re-registers what changed, an invalid one leaves the old one serving."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gpuslice.allocation.cdi import CdiError
from gpuslice.allocation.cdi_specs import CdiSpecUpkeep
from gpuslice.allocation.mps_edits import MpsConfigError, daemon_settings
from gpuslice.allocation.strategies import DeviceListSettings
from gpuslice.config import Config, ConfigError, apply_overrides, load_config, validate_startup
from gpuslice.discovery import Backend, FakeBackend
from gpuslice.gpu import Gpu, Node
from gpuslice.mps import MpsControl, MpsManager, MpsStartError
from gpuslice.plugin.compat import (
    CompatError,
    CompatOptions,
    allocate_options,
    device_list_settings,
    mps_manager,
    write_cdi_specs,
)
from gpuslice.plugin.manager import PluginManager
from gpuslice.plugin.server import PluginStartError, RegistrationError
from gpuslice.sharing import SharingError, SharingPlan, build_resources
from gpuslice.sharing.dynamic_mig import is_slot_id
from gpuslice.sharing.dynamic_plan import DYNAMIC, build_dynamic_plan

log = logging.getLogger("gpuslice.plugin")


@dataclass(frozen=True)
class ServedConfig:
    """What the plugin serves right now: the config and everything derived from it."""

    config: Config
    node: Node
    plan: SharingPlan
    settings: DeviceListSettings
    warnings: tuple[str, ...] = ()


class ConfigReloader:
    """Owns the served config, the MPS daemons and the CDI spec of one plugin process.

    `start()` brings the extras up before the manager serves; `reload()` (SIGHUP) re-reads the config
    file and applies it only if every step succeeds; `stop()` quits the MPS daemons after the servers.
    """

    def __init__(
        self,
        manager: PluginManager,
        served: ServedConfig,
        config_file: str | Path | None,
        backend: Backend,
        options: CompatOptions,
        mps_control: MpsControl | None = None,
        on_reload: Callable[[ServedConfig], None] | None = None,
        overrides: Mapping[str, Any] | None = None,
    ) -> None:
        self.manager = manager
        self.served = served
        self.config_file = config_file
        self.backend = backend
        self.options = options
        self._mps_control = mps_control
        self._on_reload = on_reload
        self.overrides = dict(overrides or {})  # flags and env vars keep winning over the file on every reload
        self._mps: MpsManager | None = None
        self._cdi = CdiSpecUpkeep(options.cdi_dir)  # the spec files this process wrote, removed at stop
        self._lock = threading.Lock()
        self.reloads = 0
        self.failed_reloads = 0

    @classmethod
    def prepare(
        cls, config: Config, node: Node, plan: SharingPlan, options: CompatOptions
    ) -> tuple[ServedConfig, tuple[str, ...]]:
        """The served state of a validated config; CompatError on a missing required IMEX channel or on more
        MPS replicas than a GPU's MPS server accepts (both refused before anything starts)."""
        for resource in plan.resources:
            if resource.sharing == "mps":
                try:
                    daemon_settings(resource)
                except MpsConfigError as exc:
                    raise CompatError(f"sharing.mps: {exc}") from exc
        settings, warnings = device_list_settings(config, options)
        return ServedConfig(config, node, plan, settings, warnings), warnings

    def start_extras(self) -> None:
        """Write the CDI spec and start the MPS daemons (before the manager serves); raises on failure."""
        write_cdi_specs(self._cdi, self.served.config, self.served.settings, self.served.node)
        self._mps = self._start_mps(self.served)

    def _start_mps(self, served: ServedConfig) -> MpsManager | None:
        manager = mps_manager(served.config, served.plan, self.options, self._mps_control)
        if manager is not None:
            manager.start(served.plan.resources)
        return manager

    def stop(self) -> None:
        """Quit the MPS daemons and remove the CDI specs we wrote. Idempotent; call after the servers stop."""
        with self._lock:
            if self._mps is not None:
                self._mps.stop()
                self._mps = None
            try:
                self._cdi.remove()
            except CdiError as exc:
                log.error("%s", exc)

    def on_sighup(self) -> None:
        self.reload()

    def reload(self) -> bool:
        """Re-read the config file; True if the new config now serves, False if the old one still does."""
        with self._lock:
            log.info("Received SIGHUP, restarting.")
            try:
                candidate = self._candidate()
            except Exception as exc:  # a reload must never take the serving plugin down
                self.failed_reloads += 1
                log.error("reload refused, still serving the previous config: %s", exc)
                return False
            for warning in candidate.warnings:
                log.warning("%s", warning)
            if not self._apply(candidate):
                self.failed_reloads += 1
                return False
            self.reloads += 1
            if self._on_reload is not None:
                self._on_reload(candidate)
            return True

    def _candidate(self) -> ServedConfig:
        loaded = load_config(self.config_file)
        config = apply_overrides(loaded.config, self.overrides, loaded.source)
        validate_startup(config)
        strategies = (self.served.config.flags.mig_strategy, config.flags.mig_strategy)
        if DYNAMIC in strategies and strategies[0] != strategies[1]:
            # The dynamic-MIG runtime (geometry, checkpoint, watcher) is built once, at start.
            raise ConfigError(
                f"flags.migStrategy: switching from {strategies[0]} to {strategies[1]} needs a restart of the plugin"
            )
        discovered = self.backend.discover()
        if config.flags.mig_strategy == DYNAMIC:
            carved = _placement_gpus(self.served.plan)
            node = _same_node(discovered, self.served.node, carved)
            # Same GPUs, same carved set: the same placements, so the running geometry stays valid.
            plan = build_dynamic_plan(node, config, claimed=carved)
        else:
            node = _same_node(discovered, self.served.node, frozenset())
            plan = build_resources(node, config)
        served, warnings = self.prepare(config, node, plan, self.options)
        return ServedConfig(served.config, node, plan, served.settings, loaded.warnings + plan.warnings + warnings)

    def _apply(self, candidate: ServedConfig) -> bool:
        old = self.served
        mps_changed = _mps_view(old) != _mps_view(candidate)
        if mps_changed and self._mps is not None:
            self._mps.stop()
            self._mps = None
        try:
            if mps_changed:
                self._mps = self._start_mps(candidate)
            write_cdi_specs(self._cdi, candidate.config, candidate.settings, candidate.node)
        except (MpsStartError, CompatError) as exc:
            log.error("reload failed, still serving the previous config: %s", exc)
            if mps_changed:
                self._restore_mps(old)
            return False
        options = allocate_options(candidate.config, candidate.settings)
        try:
            changed = self.manager.update(
                candidate.plan.resources, options, settings_changed=old.settings != candidate.settings
            )
        except (PluginStartError, RegistrationError) as exc:
            # The manager already serves what it could of the new set; the kubelet watcher re-registers later.
            self.served = candidate
            log.error("reload applied only in part: %s", exc)
            return False
        self.served = candidate
        log.info(
            "reloaded %s: %s", self.config_file or "the defaults", ", ".join(changed) if changed else "nothing changed"
        )
        return True

    def _restore_mps(self, old: ServedConfig) -> None:
        try:
            self._mps = self._start_mps(old)
        except MpsStartError as exc:
            log.error("the previous MPS daemons could not be restarted either: %s", exc)


def _placement_gpus(plan: SharingPlan) -> frozenset[str]:
    """UUIDs of the GPUs whose placements the plan advertises: the GPUs the dynamic-MIG geometry carves."""
    return frozenset(d.gpu.uuid for r in plan.resources for d in r.devices if is_slot_id(d.id))


def _same_node(discovered: Node, served: Node, carved: frozenset[str]) -> Node:
    """`discovered`, with the `carved` GPUs as they were served; SharingError if any other GPU fact changed.

    On NVML every instance the plugin creates or destroys shows up in discovery, so the carved GPUs are
    compared without their MIG instances, and the served ones are kept: the plan then has the very
    devices the geometry was built from, and those resources keep their servers and registrations.
    """

    def bare(gpu: Gpu) -> Gpu:
        return replace(gpu, mig_instances=()) if gpu.uuid in carved else gpu

    if tuple(map(bare, discovered.gpus)) != tuple(map(bare, served.gpus)):
        raise SharingError("the node's GPUs changed since the plugin started; restart the plugin to advertise them")
    if not carved:
        return discovered
    kept = {gpu.uuid: gpu for gpu in served.gpus if gpu.uuid in carved}
    return replace(discovered, gpus=tuple(kept.get(gpu.uuid, gpu) for gpu in discovered.gpus))


def _mps_view(served: ServedConfig) -> tuple[object, ...]:
    """What the MPS daemons depend on: the MPS resources (names and devices) and the root."""
    resources = tuple(r for r in served.plan.resources if r.sharing == "mps")
    return (served.config.flags.mps_root, resources)


def compat_options(backend: Backend, cdi_dir: str, mps_control_command: str | None) -> CompatOptions:
    """The node's CompatOptions: the fake backend pretends NVIDIA's device nodes exist, real ones look."""
    command = CompatOptions.split_command(mps_control_command)
    if isinstance(backend, FakeBackend):
        return CompatOptions.for_fake_backend(cdi_dir, command)
    return CompatOptions(cdi_dir, command)
