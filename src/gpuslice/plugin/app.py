"""The one assembly of a device-plugin process: parsed options in, a startable, stoppable, reloadable plugin out."""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Callable, Mapping
from dataclasses import field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from gpuslice.allocation import StaticAllocator, WholeGpuRule, whole_gpu_rule_for
from gpuslice.allocation.cdi import DEFAULT_CDI_DIR
from gpuslice.discovery import Backend
from gpuslice.discovery.health_file import HEALTH_FILE_POLL_S
from gpuslice.fsutil.runtime_dir import RuntimeDirError, private_runtime_dir
from gpuslice.gpu import Node
from gpuslice.health import xid_policy_from_env
from gpuslice.health.loop import build_health_loop
from gpuslice.mps import MpsControl
from gpuslice.node.served import ConfigSource, ServedNode
from gpuslice.plugin.dynamic_settings import (
    ADMISSION_GRACE_S,
    RELEASE_POLL_S,
    DynamicMigSettings,
    DynamicMigUnavailable,
    mig_control_for,
    pod_resources_socket,
)
from gpuslice.plugin.kubelet_watch import KUBELET_POLL_S
from gpuslice.plugin.lifecycle import PluginRuntime
from gpuslice.plugin.manager import AllocatorFactory, PluginExtension, PluginManager
from gpuslice.plugin.metrics import PluginMetrics
from gpuslice.plugin.reload import KEEP_SOURCE, ConfigReloader, KeepSource
from gpuslice.plugin.run import SetupError, prepare
from gpuslice.plugin.server import DEFAULT_WORKERS
from gpuslice.plugin.service import PluginObserver
from gpuslice.plugin.upkeep import NodeUpkeep, ServedConfig, compat_options, served_config
from gpuslice.records import record
from gpuslice.sharing import HealthStore, SharingPlan
from gpuslice.sharing.dynamic import CHECKPOINT_FILE_NAME, has_placements
from gpuslice.signal_loop import run_until_signalled
from gpuslice.topology import TopologySpecError, topology_from_spec
from gpuslice.wire import DEFAULT_KUBELET_SOCKET

if TYPE_CHECKING:
    from gpuslice.plugin.dynamic_runtime import DynamicMigRuntime

log = logging.getLogger("gpuslice.plugin")


@record
class AppOptions:
    """What one plugin process is told (the CLI's flags and env vars, parsed); each default once, here."""

    backend: str = "auto"  # auto | nvml | hostpath | fake
    node_spec: str | None = None  # fake backend: a YAML path or preset:NAME; None is the default preset
    config_file: str | None = None  # NVIDIA's v1 config file; None: the defaults
    # The kubelet's registration socket; None: serve without registering (NVIDIA's empty --kubelet-socket).
    kubelet_socket: str | None = DEFAULT_KUBELET_SOCKET
    socket_dir: str | None = None  # where plugin sockets go (--socket-dir); None: see plugin_dir
    node_name: str | None = None
    pod_resources_socket: str | None = None  # None: env POD_RESOURCES_SOCKET, else the kubelet's default
    mig_checkpoint: str | None = None  # None: beside the plugin sockets (the kubelet's wipe keeps it)
    metrics_port: int | None = None  # None: no metrics server; 0: any free port
    metrics_address: str = ""
    cdi_spec_dir: str = DEFAULT_CDI_DIR
    mps_control_command: str | None = None  # None: nvidia-cuda-mps-control
    # NVIDIA's flags and env vars that were set, as dotted config keys; they win over the file on every load.
    overrides: Mapping[str, Any] = field(default_factory=dict)
    environ: Mapping[str, str] = field(default_factory=dict)  # DP_*_HEALTHCHECKS and friends
    # False: gpuslice's plain Allocate answer (NVIDIA_VISIBLE_DEVICES and device nodes) instead of NVIDIA's.
    nvidia_answers: bool = True
    workers: int = DEFAULT_WORKERS  # gRPC worker threads per resource server
    health_poll_s: float = HEALTH_FILE_POLL_S
    kubelet_poll_s: float = KUBELET_POLL_S
    release_poll_s: float = RELEASE_POLL_S
    admission_grace_s: float = ADMISSION_GRACE_S

    @property
    def plugin_dir(self) -> Path:
        """The socket directory: `socket_dir`, else the kubelet socket's directory; when not registering, the
        kubelet default's if we may write there, else our private runtime directory (a non-root user)."""
        if self.socket_dir:
            return Path(self.socket_dir)
        if self.kubelet_socket:
            return Path(self.kubelet_socket).parent
        default = Path(DEFAULT_KUBELET_SOCKET).parent
        if os.access(default, os.W_OK | os.X_OK):
            return default
        try:
            return private_runtime_dir()
        except RuntimeDirError as exc:
            raise SetupError(f"{exc}; give a socket directory with --socket-dir") from exc

    @property
    def checkpoint_path(self) -> Path:
        return Path(self.mig_checkpoint) if self.mig_checkpoint else self.plugin_dir / CHECKPOINT_FILE_NAME


def _whole_gpu_rule(setup: ServedNode) -> WholeGpuRule | None:
    """Rule A (whole GPUs inside one NVLink domain) on the node's topology; SetupError on a bad topology."""
    if not setup.node.gpus:
        return None
    try:
        topology = topology_from_spec(setup.backend.topology_spec(), setup.node.gpus)
    except TopologySpecError as exc:
        raise SetupError(f"node spec: {exc}") from exc
    return whole_gpu_rule_for(topology)


class PluginApp:
    """One device-plugin process: setup (config, backend, node, plan), servers, upkeep, health, metrics, reloads.

    Building it checks every input (SetupError, ConfigError, CompatError) and serves nothing; `start()`
    writes the CDI spec and starts the MPS daemons, then the metrics server, the health loop and the
    servers (registered through the kubelet watcher); `stop()` undoes it in reverse. `reload()` is what
    SIGHUP does; `reload(source)` switches to another config source the same way (a node-label watch
    choosing a per-node config calls it). All three are safe from any thread.
    """

    def __init__(
        self,
        options: AppOptions,
        *,
        backend: Backend | None = None,
        mps_control: MpsControl | None = None,
        metrics: PluginMetrics | None = None,
        observer: PluginObserver | None = None,
        on_reload: Callable[[ServedConfig], None] | None = None,
        allocator_factory: AllocatorFactory = StaticAllocator,
    ) -> None:
        """`backend` replaces the one `options.backend` names; `mps_control` the MPS control program;
        `observer` hears of allocations instead of `metrics` (benchmarks time the handler);
        `allocator_factory` builds the allocator of every resource that dynamic MIG does not serve."""
        self.options = options
        self.metrics = metrics or PluginMetrics()
        # The served node: config, backend, node, plan (SetupError on any bad input).
        self.setup: ServedNode = prepare(
            options.backend,
            options.node_spec,
            options.config_file,
            options.node_name,
            mig_checkpoint=options.checkpoint_path,
            overrides=options.overrides,
            backend=backend,
        )
        setup = self.setup
        compat = compat_options(setup.backend, options.cdi_spec_dir, options.mps_control_command)
        served = served_config(setup.config, setup.node, setup.plan, compat, options.nvidia_answers)
        self.warnings = setup.warnings + served.warnings
        # The servers: one per resource, with dynamic MIG as an extension when the plan has placements.
        self.dynamic_mig: DynamicMigRuntime | None = self._dynamic_mig(setup)
        extensions: list[PluginExtension] = [self.dynamic_mig] if self.dynamic_mig is not None else []
        self.manager = PluginManager(
            setup.plan.resources,
            HealthStore(setup.node),
            options.kubelet_socket or None,
            options=served.allocate_options,
            whole_gpu_rule=_whole_gpu_rule(setup),
            socket_dir=options.plugin_dir,
            observer=observer or self.metrics,
            workers=options.workers,
            extensions=extensions,
            allocator_factory=allocator_factory,
        )
        # What the config needs besides the servers (CDI specs, MPS daemons), and the reloads.
        self.upkeep = NodeUpkeep(compat, mps_control)
        self.reloader = ConfigReloader(
            self.manager,
            served,
            options.config_file,
            setup.backend,
            compat,
            self.upkeep,
            on_reload,
            options.overrides,
            options.nvidia_answers,
        )
        # The process around them: health loop (DP_*_HEALTHCHECKS rules), kubelet watch, metrics server.
        health_loop = build_health_loop(
            setup.backend,
            setup.node,
            self.manager.health,
            xid_policy_from_env(options.environ),
            setup.config.gpuslice.health_recovery,
            self.metrics,
            options.health_poll_s,
        )
        self.runtime = PluginRuntime(
            self.manager,
            health_loop=health_loop,
            metrics=self.metrics,
            metrics_port=options.metrics_port,
            metrics_address=options.metrics_address,
            poll_interval_s=options.kubelet_poll_s,
        )
        self.runtime.add_shutdown_hook(self.upkeep.stop)  # MPS daemons quit after the servers are down

    def _dynamic_mig(self, setup: ServedNode) -> DynamicMigRuntime | None:
        if not has_placements(setup.plan):
            return None
        from gpuslice.plugin.dynamic_runtime import DynamicMigRuntime  # its modules load only for such a plan

        options = self.options
        settings = DynamicMigSettings(
            pod_resources_socket(options.pod_resources_socket),
            options.checkpoint_path,
            options.release_poll_s,
            options.admission_grace_s,
        )
        try:
            control = mig_control_for(setup.backend, setup.node)
        except DynamicMigUnavailable as exc:
            raise SetupError(str(exc)) from exc
        return DynamicMigRuntime(setup.plan.resources, setup.node.name, control, settings)

    @property
    def backend(self) -> Backend:
        return self.setup.backend

    @property
    def node(self) -> Node:
        return self.reloader.served.node

    @property
    def plan(self) -> SharingPlan:
        return self.reloader.served.plan

    @property
    def served(self) -> ServedConfig:
        return self.reloader.served

    def start(self) -> None:
        """Upkeep first (CDI spec, MPS daemons, as NVIDIA does), then serve; on failure nothing stays up."""
        try:
            self.upkeep.start(self.reloader.served)
            self.runtime.start()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop serving, then the upkeep, then release the backend (NVML). Idempotent."""
        self.runtime.stop()
        self.upkeep.stop()
        self.setup.backend.close()

    def reload(self, config_source: ConfigSource | KeepSource = KEEP_SOURCE) -> bool:
        """Re-read the config (SIGHUP), or switch to `config_source`; True if the new config now serves.

        A config that fails anywhere (parse, validation, discovery, upkeep, servers) leaves the old one
        serving and returns False; the reason is logged.
        """
        return self.reloader.reload(config_source)

    def run_until_signalled(self, ready: Callable[[], None] | None = None) -> signal.Signals:
        """Start, serve until SIGTERM, SIGINT or SIGQUIT (SIGHUP reloads), stop; main thread only."""
        return run_until_signalled(self, ready, handlers={signal.SIGHUP: self._on_sighup})

    def _on_sighup(self) -> None:
        self.reload()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
