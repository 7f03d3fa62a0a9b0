"""`gpuslice plugin`: run the device plugin (one gRPC server per advertised resource) until SIGTERM."""

from __future__ import annotations

import logging
import sys

import click

from gpuslice.plugin import PluginStartError, RegistrationError
from gpuslice.plugin.run import SetupError, build_manager, prepare, run_until_signalled
from gpuslice.wire import DEFAULT_KUBELET_SOCKET

EXIT_BAD_INPUT = 2
EXIT_START_FAILED = 1


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
@click.option("--node-name", envvar="NODE_NAME", default=None, help="This node's name (NVML and host-path backends).")
@click.option("--log-level", default="info", show_default=True, type=click.Choice(["debug", "info", "warning"]))
def plugin(
    backend: str,
    node_spec: str | None,
    config_file: str | None,
    kubelet_socket: str,
    node_name: str | None,
    log_level: str,
) -> None:
    """Run the device plugin: serve every advertised resource, register it, stop cleanly on SIGTERM/SIGINT."""
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    log = logging.getLogger("gpuslice.plugin")
    try:
        setup = prepare(backend, node_spec, config_file, node_name)
        socket_dir = None if kubelet_socket else DEFAULT_KUBELET_SOCKET.rsplit("/", 1)[0]
        manager = build_manager(setup, kubelet_socket or None, socket_dir)
    except SetupError as exc:
        click.echo(f"gpuslice plugin: error: {exc}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    for warning in setup.warnings:
        log.warning("%s", warning)
    for resource in setup.plan.resources:
        log.info(
            "advertising %s: %d devices (%s), isolation %s",
            resource.name,
            len(resource.devices),
            resource.derivation,
            resource.isolation.value,
        )
    try:
        run_until_signalled(manager, ready=lambda: log.info("plugin ready"))
    except (PluginStartError, RegistrationError) as exc:
        click.echo(f"gpuslice plugin: error: {exc}", err=True)
        sys.exit(EXIT_START_FAILED)
    log.info("plugin stopped")
