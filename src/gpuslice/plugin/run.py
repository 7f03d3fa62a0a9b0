"""The plugin's building blocks for a node: backend -> node -> resources -> PluginManager (plugin.app assembles)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpuslice.allocation import AllocateOptions, whole_gpu_rule_for
from gpuslice.config import Config
from gpuslice.discovery import Backend
from gpuslice.gpu import Node
from gpuslice.node.served import ServedConfigError, ServedNode, backend_from_flags, build_served, use_backend
from gpuslice.plugin.dynamic_settings import DynamicMigSettings, DynamicMigUnavailable, has_dynamic_placements
from gpuslice.plugin.manager import PluginExtension, PluginManager
from gpuslice.plugin.server import DEFAULT_WORKERS
from gpuslice.plugin.service import PluginObserver
from gpuslice.sharing import HealthStore, SharingPlan, is_dynamic
from gpuslice.sharing.dynamic.checkpoint import claimed_gpus
from gpuslice.topology import TopologySpecError, topology_from_spec

log = logging.getLogger("gpuslice.plugin")


class SetupError(ValueError):
    """Bad input found before anything is served or registered (exit code 2); the message names the key."""


def prepare(
    backend_kind: str,
    node_spec: str | None,
    config_file: str | None,
    node_name: str | None = None,
    *,
    mig_checkpoint: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    backend: Backend | None = None,
) -> ServedNode:
    """The served node (config, node, plan, backend, warnings) for the plugin; SetupError on any bad input.

    Under `migStrategy: dynamic`, GPUs the `mig_checkpoint` file holds placements on stay dynamic even
    though their instances (ours) now exist. `overrides` are NVIDIA's flags and env vars that were set
    (dotted config keys, see config.PLUGIN_FLAGS); they win over the file. `backend`, when given, is
    used instead of building the one `backend_kind` names.
    """
    make = use_backend(backend) if backend is not None else backend_from_flags(backend_kind, node_spec, node_name)

    def claimed(config: Config, node: Node) -> frozenset[str]:
        return claimed_gpus(Path(mig_checkpoint), node.name) if is_dynamic(config) and mig_checkpoint else frozenset()

    try:
        served = build_served(config_file, make, overrides=overrides, claimed_gpus=claimed)
    except ServedConfigError as exc:
        raise SetupError(str(exc)) from exc
    return served


def build_manager(
    setup: ServedNode,
    kubelet_socket: str | Path | None,
    socket_dir: str | Path,
    *,
    dynamic_settings: DynamicMigSettings,
    observer: PluginObserver | None = None,
    options: AllocateOptions | None = None,
    workers: int = DEFAULT_WORKERS,
) -> PluginManager:
    """A PluginManager for the prepared node (not started); `observer` gets allocations and streams (metrics).

    `options`: the Allocate pipeline (plugin.compat.allocate_options for NVIDIA's strategies, CDI and MPS).
    With dynamic MIG placements in the plan it carries a DynamicMigRuntime built from `dynamic_settings`.
    """
    dynamic = None
    if has_dynamic_placements(setup.plan):
        from gpuslice.plugin.dynamic_runtime import runtime_for  # its modules load only for such a plan

        try:
            dynamic = runtime_for(setup.plan, setup.node, setup.backend, dynamic_settings)
        except DynamicMigUnavailable as exc:
            raise SetupError(str(exc)) from exc
    return assemble_manager(
        setup.plan,
        setup.node,
        setup.config,
        kubelet_socket,
        setup.backend.topology_spec(),
        socket_dir=socket_dir,
        workers=workers,
        dynamic_mig=dynamic,
        observer=observer,
        options=options,
    )


def assemble_manager(
    plan: SharingPlan,
    node: Node,
    config: Config,
    kubelet_socket: str | Path | None,
    topology_section: Mapping[str, Any] | None = None,
    *,
    socket_dir: str | Path | None = None,
    workers: int = DEFAULT_WORKERS,
    observer: PluginObserver | None = None,
    options: AllocateOptions | None = None,
    health: HealthStore | None = None,
    dynamic_mig: PluginExtension | None = None,
) -> PluginManager:
    """Wire a plan to a PluginManager: health store, Allocate options and Rule A on the node's topology.

    Defaults: a fresh HealthStore, and AllocateOptions.from_config(config) (NVIDIA_VISIBLE_DEVICES and
    device nodes); pass `options` for another pipeline (device list strategies, CDI, MPS), and
    `dynamic_mig` for the dynamic-MIG runtime (it builds the services and lives as long as the manager).
    """
    try:
        topology = topology_from_spec(topology_section, node.gpus) if node.gpus else None
    except TopologySpecError as exc:
        raise SetupError(f"node spec: {exc}") from exc
    return PluginManager(
        plan.resources,
        health or HealthStore(node),
        kubelet_socket,
        options=options or AllocateOptions.from_config(config),
        whole_gpu_rule=whole_gpu_rule_for(topology) if topology is not None else None,
        socket_dir=socket_dir,
        observer=observer,
        workers=workers,
        extension=dynamic_mig,
    )
