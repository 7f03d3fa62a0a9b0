"""Config reloads (SIGHUP, or a new config source): a valid config re-registers what changed, an invalid
one leaves the old one serving."""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from gpuslice.config import Config, ConfigError
from gpuslice.discovery import Backend
from gpuslice.gpu import Gpu, Node
from gpuslice.node.served import ConfigSource, build_served, use_backend
from gpuslice.plugin.compat import CompatOptions
from gpuslice.plugin.manager import PluginManager
from gpuslice.plugin.server import PluginStartError, RegistrationError
from gpuslice.plugin.upkeep import NodeUpkeep, ServedConfig, served_config
from gpuslice.sharing import SharingError, is_dynamic
from gpuslice.sharing.dynamic import DYNAMIC, placement_gpus

log = logging.getLogger("gpuslice.plugin")


class KeepSource(enum.Enum):
    SOURCE = "the current config source"


KEEP_SOURCE = KeepSource.SOURCE  # reload(): read the current source again (SIGHUP)


class ConfigReloader:
    """Owns the served config of one plugin process and moves it to a new one when asked.

    `reload()` re-reads the config source (a new one replaces it for later reloads) and applies it only
    if every step succeeds: config, discovery, plan, node upkeep (CDI spec, MPS daemons), servers.
    """

    def __init__(
        self,
        manager: PluginManager,
        served: ServedConfig,
        config_source: ConfigSource,
        backend: Backend,
        options: CompatOptions,
        upkeep: NodeUpkeep,
        on_reload: Callable[[ServedConfig], None] | None = None,
        overrides: Mapping[str, Any] | None = None,
        nvidia_answers: bool = True,
    ) -> None:
        self.manager = manager
        self.served = served
        self.config_source = config_source
        self.backend = backend
        self.options = options
        self.upkeep = upkeep
        self._on_reload = on_reload
        self.overrides = dict(overrides or {})  # flags and env vars keep winning over the file on every reload
        self.nvidia_answers = nvidia_answers
        self._lock = threading.Lock()
        self._carved_now: frozenset[str] = frozenset()  # set by each candidate's config check
        self.reloads = 0
        self.failed_reloads = 0

    def reload(self, config_source: ConfigSource | KeepSource = KEEP_SOURCE) -> bool:
        """Re-read the config; True if the new config now serves, False if the old one still does.

        A `config_source` other than KEEP_SOURCE replaces the source (for this and every later reload)
        once it serves; KEEP_SOURCE reads the current one again, as SIGHUP does.
        """
        with self._lock:
            if isinstance(config_source, KeepSource):
                source = self.config_source
                log.info("Received SIGHUP, restarting.")
            else:
                source = config_source
                log.info("reloading from a new config source: %s", source or "the defaults")
            try:
                candidate = self._candidate(source)
            except Exception as exc:  # a reload must never take the serving plugin down
                self.failed_reloads += 1
                log.error("reload refused, still serving the previous config: %s", exc)
                return False
            for warning in candidate.warnings:
                log.warning("%s", warning)
            if not self._apply(candidate, source):
                self.failed_reloads += 1
                return False
            self.reloads += 1
            if self._on_reload is not None:
                self._on_reload(candidate)
            return True

    def _candidate(self, source: ConfigSource) -> ServedConfig:
        served = build_served(
            source,
            use_backend(self.backend),
            overrides=self.overrides,
            claimed_gpus=self._carved,
            check=self._same_strategy,
            adjust_node=lambda discovered: _same_node(discovered, self.served.node, self._carved_now),
        )
        candidate = served_config(served.config, served.node, served.plan, self.options, self.nvidia_answers)
        return replace(candidate, warnings=served.warnings + candidate.warnings)

    def _same_strategy(self, config: Config, source: str) -> None:
        strategies = (self.served.config.flags.mig_strategy, config.flags.mig_strategy)
        if DYNAMIC in strategies and strategies[0] != strategies[1]:
            # The dynamic-MIG runtime (geometry, checkpoint, watcher) is built once, at start.
            raise ConfigError(
                f"flags.migStrategy: switching from {strategies[0]} to {strategies[1]} needs a restart of the plugin"
            )
        # Under dynamic MIG: the same GPUs and the same carved set give the same placements, so the
        # running geometry stays valid.
        self._carved_now = placement_gpus(self.served.plan) if is_dynamic(config) else frozenset()

    def _carved(self, config: Config, node: Node) -> frozenset[str]:
        return self._carved_now

    def _apply(self, candidate: ServedConfig, source: ConfigSource) -> bool:
        old = self.served
        if not self.upkeep.apply(candidate):
            return False
        options = candidate.allocate_options
        try:
            changed = self.manager.update(
                candidate.plan.resources, options, settings_changed=old.allocate_options != options
            )
        except (PluginStartError, RegistrationError) as exc:
            # The manager already serves what it could of the new set; the kubelet watcher re-registers later.
            self.served, self.config_source = candidate, source
            log.error("reload applied only in part: %s", exc)
            return False
        self.served, self.config_source = candidate, source
        log.info("reloaded %s: %s", source or "the defaults", ", ".join(changed) if changed else "nothing changed")
        return True


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
