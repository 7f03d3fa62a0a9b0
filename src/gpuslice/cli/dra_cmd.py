"""`gpuslice dra`: run the DRA kubelet plugin until SIGTERM, or print the ResourceSlices it would publish."""

from __future__ import annotations

import logging
import os
import shlex
import sys
from pathlib import Path

import click

from gpuslice.cli.nvidia_options import EXIT_BAD_INPUT, EXIT_START_FAILED, nvidia_flags, nvidia_overrides
from gpuslice.dra.names import (
    DEFAULT_DRIVER,
    DEFAULT_KUBELET_ROOT,
    NVIDIA_DRIVER,
    PLUGINS_DIR_NAME,
    REGISTRY_DIR_NAME,
    DriverNameError,
)
from gpuslice.dra.slices import API_VERSIONS
from gpuslice.logs import configure_logging

_DEFAULT_REGISTRY = f"{DEFAULT_KUBELET_ROOT}/{REGISTRY_DIR_NAME}"
_DEFAULT_PLUGINS = f"{DEFAULT_KUBELET_ROOT}/{PLUGINS_DIR_NAME}"


@click.command()
@click.option("--backend", type=click.Choice(["auto", "nvml", "hostpath", "fake"]), default="auto",
              show_default=True, envvar="BACKEND", help="Where GPUs come from; `fake` reads --node-spec.")  # fmt: skip
@click.option("--node-spec", envvar="NODE_SPEC", default=None, help="Fake backend: FILE or preset:NAME.")
@click.option("--config-file", envvar="CONFIG_FILE", default=None, help="NVIDIA v1 config file (YAML or JSON).")
@click.option("--node-name", envvar="NODE_NAME", default=None, help="This node's name: the pool and spec.nodeName.")
@click.option("--driver-name", envvar="DRIVER_NAME", default=DEFAULT_DRIVER, show_default=True,
              help=f"The DRA driver name; {NVIDIA_DRIVER} to stand in for NVIDIA's driver.")  # fmt: skip
@click.option("--plugins-registry", envvar="PLUGINS_REGISTRY", default=_DEFAULT_REGISTRY, show_default=True,
              help="The kubelet's plugin-watcher directory (our <driver>-reg.sock goes here).")  # fmt: skip
@click.option("--plugins-dir", envvar="PLUGINS_DIR", default=_DEFAULT_PLUGINS, show_default=True,
              help="The kubelet's plugins directory (<driver>/dra.sock and our checkpoint).")  # fmt: skip
@click.option("--cdi-spec-dir", envvar="CDI_SPEC_DIR", default="/var/run/cdi", show_default=True,
              help="Where each claim's transient CDI spec is written.")  # fmt: skip
@click.option("--mps-control-command", envvar="MPS_CONTROL_COMMAND", default=None,
              help="The MPS control program, split like a shell would [default: nvidia-cuda-mps-control].")  # fmt: skip
@click.option("--kube-api-server", envvar="KUBE_API_SERVER", default=None,
              help="API server URL [default: in-cluster config or KUBECONFIG].")  # fmt: skip
@click.option("--resource-api-version", envvar="RESOURCE_API_VERSION", default="auto", show_default=True,
              type=click.Choice(["auto", *API_VERSIONS]),
              help="resource.k8s.io version to write; auto asks the server (v1, v1beta2, v1beta1).")  # fmt: skip
@click.option("--resync-interval", envvar="RESYNC_INTERVAL", type=click.FloatRange(0.05, 3600), default=10.0,
              show_default=True, help="Seconds between checks that our ResourceSlices are still there.")  # fmt: skip
@click.option("--counter-layout", envvar="COUNTER_LAYOUT", default="auto", show_default=True,
              type=click.Choice(["auto", "combined", "split"]),
              help="Counter sets with their devices (1.34) or apart (1.35+); auto asks the server.")  # fmt: skip
@click.option("--metrics-port", envvar="METRICS_PORT", type=click.IntRange(0, 65535), default=None,
              help="Serve /metrics, /healthz and /readyz on this port (0: any free port) [default: off].")  # fmt: skip
@click.option("--metrics-address", envvar="METRICS_ADDRESS", default="",
              help="Bind /metrics, /healthz and /readyz to this address (127.0.0.1, a pod IP, ::) "
              "[default: every address].")  # fmt: skip
@click.option("--print-resource-slices", is_flag=True, help="Print the slices as multi-document YAML and exit.")
@click.option("--log-level", default="info", show_default=True, type=click.Choice(["debug", "info", "warning"]))
@nvidia_flags
def dra(
    backend: str,
    node_spec: str | None,
    config_file: str | None,
    node_name: str | None,
    driver_name: str,
    plugins_registry: str,
    plugins_dir: str,
    cdi_spec_dir: str,
    mps_control_command: str | None,
    kube_api_server: str | None,
    resource_api_version: str,
    resync_interval: float,
    counter_layout: str,
    metrics_port: int | None,
    metrics_address: str,
    print_resource_slices: bool,
    log_level: str,
    **nvidia: str | None,
) -> None:
    """Run the DRA kubelet plugin: register with the kubelet, publish ResourceSlices, prepare claims."""
    configure_logging(level=getattr(logging, log_level.upper()), node_name=node_name)
    log = logging.getLogger("gpuslice.dra")
    from gpuslice.dra.checkpoint import ClaimCheckpoint, gpus_with_prepared_migs
    from gpuslice.dra.names import CHECKPOINT_NAME, plugin_dir
    from gpuslice.dra.setup import DraSetupError, prepare_setup
    from gpuslice.dra.slices import PoolSpec, build_slices

    try:
        from gpuslice.dra.names import check_driver_name

        check_driver_name(driver_name)
        checkpoint = ClaimCheckpoint(plugin_dir(plugins_dir, driver_name) / CHECKPOINT_NAME, node_name or "")
        claimed = gpus_with_prepared_migs(checkpoint.path)
        setup = prepare_setup(backend, node_spec, config_file, node_name, nvidia_overrides(nvidia, os.environ),
                              claimed_gpus=claimed)  # fmt: skip
    except (DraSetupError, DriverNameError) as exc:
        click.echo(f"gpuslice dra: error: {exc}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    for warning in setup.warnings:
        log.warning("%s", warning)
    if print_resource_slices:
        import yaml  # only this path writes YAML; a start without a config file never loads a YAML module

        version = "v1" if resource_api_version == "auto" else resource_api_version
        layout = "combined" if counter_layout == "auto" else counter_layout
        slices = build_slices(PoolSpec(driver_name, setup.node.name, version, layout), setup.devices, 1)
        click.echo(yaml.safe_dump_all(slices, sort_keys=False), nl=False)
        return
    _run(setup, driver_name, plugins_registry, plugins_dir, cdi_spec_dir, mps_control_command,
         kube_api_server, resource_api_version, resync_interval, counter_layout, metrics_port,
         metrics_address)  # fmt: skip


def _run(
    setup: object,
    driver: str,
    registry: str,
    plugins: str,
    cdi_dir: str,
    mps_command: str | None,
    server: str | None,
    api_version: str,
    resync_s: float,
    counter_layout: str,
    metrics_port: int | None,
    metrics_address: str,
) -> None:
    from gpuslice.allocation.cdi import CdiError
    from gpuslice.dra.api import ApiError
    from gpuslice.dra.app import DraApp
    from gpuslice.dra.kube import LightkubeResourceApi
    from gpuslice.dra.settings import DraSettings
    from gpuslice.dra.setup import DraSetup
    from gpuslice.dra.sockets import SocketError

    assert isinstance(setup, DraSetup)
    log = logging.getLogger("gpuslice.dra")
    settings = DraSettings(
        driver=driver,
        registry_dir=Path(registry),
        plugins_dir=Path(plugins),
        cdi_dir=Path(cdi_dir),
        mps_control_command=tuple(shlex.split(mps_command)) if mps_command else ("nvidia-cuda-mps-control",),
        resource_api_version=api_version,
        resync_s=resync_s,
        counter_layout=counter_layout,
        environ=dict(os.environ),
        metrics_port=metrics_port,
        metrics_address=metrics_address,
    )
    try:
        app = DraApp(setup, settings, LightkubeResourceApi(server))
        app.run_until_signalled(ready=lambda: log.info("DRA plugin ready"))
    except (ApiError, SocketError, CdiError) as exc:  # CdiError: the base CDI spec cannot be written
        click.echo(f"gpuslice dra: error: {exc}", err=True)
        sys.exit(EXIT_START_FAILED)
    log.info("DRA plugin stopped")
