"""`gpuslice plugin`: run the device plugin (one gRPC server per advertised resource) until SIGTERM."""

from __future__ import annotations

import logging
import os
import sys

import click

from gpuslice.allocation.cdi import DEFAULT_CDI_DIR
from gpuslice.cli.node_config_options import chosen_file, node_config_options, node_config_watcher
from gpuslice.cli.nvidia_options import EXIT_BAD_INPUT, EXIT_START_FAILED, nvidia_flags, nvidia_overrides
from gpuslice.config import ConfigError
from gpuslice.config.node_config import NodeConfigError
from gpuslice.logs import LOG_FORMATS, configure_logging
from gpuslice.mps import MpsStartError
from gpuslice.plugin import PluginStartError, RegistrationError
from gpuslice.plugin.app import AppOptions, PluginApp
from gpuslice.plugin.compat import CompatError
from gpuslice.plugin.metrics import PluginMetrics
from gpuslice.plugin.run import SetupError
from gpuslice.wire import DEFAULT_KUBELET_SOCKET, DEFAULT_POD_RESOURCES_SOCKET


@click.command()
@click.option(
    "--backend",
    type=click.Choice(["auto", "nvml", "hostpath", "fake"]),
    default="auto",
    show_default=True,
    envvar="BACKEND",
    help="Where GPUs come from; `fake` reads --node-spec.",
)
@click.option("--node-spec", envvar="NODE_SPEC", default=None, help="Fake backend: FILE or preset:NAME.")
@click.option("--config-file", envvar="CONFIG_FILE", default=None, help="NVIDIA v1 config file (YAML or JSON).")
@click.option(
    "--kubelet-socket",
    envvar="KUBELET_SOCKET",
    default=DEFAULT_KUBELET_SOCKET,
    show_default=True,
    help="The kubelet's registration socket; plugin sockets go in its directory. Empty: serve, do not register.",
)
@click.option(
    "--socket-dir",
    envvar="SOCKET_DIR",
    default=None,
    help="Where the plugin's own sockets go [default: the kubelet socket's directory; not registering: that "
    "directory if writable, else a private one ($XDG_RUNTIME_DIR/gpuslice or <tmp>/gpuslice-<uid>)].",
)
@click.option("--node-name", envvar="NODE_NAME", default=None, help="This node's name (NVML and host-path backends).")
@click.option(
    "--pod-resources-socket",
    envvar="POD_RESOURCES_SOCKET",
    default=DEFAULT_POD_RESOURCES_SOCKET,
    show_default=True,
    help="The kubelet's pod-resources socket; migStrategy dynamic learns releases from it.",
)
@click.option(
    "--mig-checkpoint",
    envvar="MIG_CHECKPOINT",
    default=None,
    help="migStrategy dynamic: where held MIG placements are recorded [default: beside the plugin sockets].",
)
@click.option("--log-level", default="info", show_default=True, type=click.Choice(["debug", "info", "warning"]))
@click.option(
    "--metrics-port",
    envvar="METRICS_PORT",
    type=click.IntRange(0, 65535),
    default=None,
    help="Serve /metrics, /healthz and /readyz on this port (0: any free port) [default: off].",
)
@click.option(
    "--metrics-address",
    envvar="METRICS_ADDRESS",
    default="",
    help="Bind /metrics, /healthz and /readyz to this address (127.0.0.1, a pod IP, ::) [default: every address].",
)
@click.option("--log-format", envvar="LOG_FORMAT", type=click.Choice(LOG_FORMATS), default="klog", show_default=True)
@click.option(
    "-v",
    "--v",
    "verbosity",
    envvar="VERBOSITY",
    type=click.IntRange(0, 10),
    default=0,
    help="klog verbosity; 1+ logs debug.",
)
@click.option(
    "--cdi-spec-dir",
    envvar="CDI_SPEC_DIR",
    default=DEFAULT_CDI_DIR,
    show_default=True,
    help="Where the CDI spec is written when a cdi-* device list strategy is on.",
)
@click.option(
    "--mps-control-command",
    envvar="MPS_CONTROL_COMMAND",
    default=None,
    help="The MPS control program, split like a shell would [default: nvidia-cuda-mps-control].",
)
@node_config_options
@nvidia_flags
def plugin(
    backend: str,
    node_spec: str | None,
    config_file: str | None,
    kubelet_socket: str,
    socket_dir: str | None,
    node_name: str | None,
    pod_resources_socket: str,
    mig_checkpoint: str | None,
    log_level: str,
    metrics_port: int | None,
    metrics_address: str,
    log_format: str,
    verbosity: int,
    cdi_spec_dir: str,
    mps_control_command: str | None,
    config_file_srcdir: str | None,
    node_label: str,
    default_config: str | None,
    fallback_strategies: str,
    **nvidia: str | None,
) -> None:
    """Run the device plugin: serve every advertised resource, register it, stop cleanly on SIGTERM/SIGINT."""
    level = logging.DEBUG if verbosity >= 1 else getattr(logging, log_level.upper())
    configure_logging(log_format, verbosity, node_name, level=level)  # type: ignore[arg-type]
    log = logging.getLogger("gpuslice.plugin")
    metrics = PluginMetrics()
    try:
        watcher = node_config_watcher(
            config_file_srcdir,
            node_label,
            default_config,
            fallback_strategies,
            node_name,
            config_file,
            metrics.registry if config_file_srcdir else None,  # the Prometheus client only when needed
        )
        if watcher is not None:
            config_file = chosen_file(watcher)
        options = AppOptions(
            backend=backend,
            node_spec=node_spec,
            config_file=config_file,
            kubelet_socket=kubelet_socket or None,
            socket_dir=socket_dir or None,
            node_name=node_name,
            pod_resources_socket=pod_resources_socket,
            mig_checkpoint=mig_checkpoint,
            metrics_port=metrics_port,
            metrics_address=metrics_address,
            cdi_spec_dir=cdi_spec_dir,
            mps_control_command=mps_control_command,
            overrides=nvidia_overrides(nvidia, os.environ),
            environ=dict(os.environ),
        )
        app = PluginApp(options, metrics=metrics)
    except (SetupError, ConfigError, CompatError, NodeConfigError) as exc:
        click.echo(f"gpuslice plugin: error: {exc}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    except PluginStartError as exc:
        click.echo(f"gpuslice plugin: error: {exc}", err=True)
        sys.exit(EXIT_START_FAILED)
    for warning in app.warnings:
        log.warning("%s", warning)
    for resource in app.plan.resources:
        log.info(
            "advertising %s: %d devices (%s), isolation %s",
            resource.name,
            len(resource.devices),
            resource.derivation,
            resource.isolation.value,
        )
    try:

        def ready() -> None:
            log.info("plugin ready")
            if watcher is not None:  # label changes reload as SIGHUP does, once the servers are up
                directory = watcher.settings.directory
                watcher.start(lambda choice: app.reload(choice.path(directory)))
                app.runtime.add_shutdown_hook(watcher.stop)
                app.runtime.add_liveness_check("node-config watcher", lambda: watcher.alive)

        app.run_until_signalled(ready=ready)
    except (PluginStartError, RegistrationError, MpsStartError, CompatError) as exc:
        app.stop()
        click.echo(f"gpuslice plugin: error: {exc}", err=True)
        sys.exit(EXIT_START_FAILED)
    log.info("plugin stopped")
