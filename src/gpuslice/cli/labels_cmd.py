"""`gpuslice labels`: gpu-feature-discovery compatible node labels, once or periodically (SIGHUP reloads)."""

from __future__ import annotations

import logging
import os
import signal
import sys
from typing import Any, cast

import click

from gpuslice.cli.node_config_options import chosen_file, node_config_options, node_config_watcher
from gpuslice.config import ConfigError
from gpuslice.config.node_config import NodeConfigChoice, NodeConfigError
from gpuslice.discovery import NodeSpecError
from gpuslice.discovery.select import BACKEND_KINDS, BackendInitError, make_backend
from gpuslice.labels.loop import Labeller, LoopControl
from gpuslice.labels.nodefeature import NodeFeatureError
from gpuslice.labels.settings import LabelOptions, NodeFeatureMode, load_settings
from gpuslice.logs import configure_logging

# Command-line flags -> config keys; their environment variables are read by the config package (GFD_FLAGS).
_FLAG_KEYS = {
    "mig_strategy": "flags.migStrategy",
    "fail_on_init_error": "flags.failOnInitError",
    "driver_root": "flags.nvidiaDriverRoot",
    "oneshot": "flags.gfd.oneshot",
    "no_timestamp": "flags.gfd.noTimestamp",
    "sleep_interval": "flags.gfd.sleepInterval",
    "output_file": "flags.gfd.outputFile",
    "machine_type_file": "flags.gfd.machineTypeFile",
    "use_node_feature_api": "flags.useNodeFeatureAPI",
}


def _error(exc: Exception, flags: dict[str, Any], node_spec: str | None) -> click.ClickException:
    """A bad flag value is a usage mistake (exit 2 with usage, naming the flag), as in every command; the rest
    (a config file, the backend, the API) exits 1."""
    text = str(exc)
    for name, key in _FLAG_KEYS.items():
        if flags.get(name) is not None and f"{key}:" in text:
            return click.BadParameter(text, param_hint="--" + name.replace("_", "-"))
    # a node spec that does not load (the fake backend wraps its NodeSpecError) is about that option
    if node_spec is not None and (isinstance(exc, NodeSpecError) or isinstance(exc.__cause__, NodeSpecError)):
        return click.BadParameter(text, param_hint="--node-spec")
    return click.ClickException(text)


@click.command()
@click.option(
    "--backend",
    type=click.Choice(BACKEND_KINDS),
    default="fake",
    show_default=True,
    envvar="BACKEND",
    help="Where GPUs come from (as for `gpuslice plugin`); `fake` reads --node-spec.",
)
@click.option("--node-spec", envvar="NODE_SPEC", help="Fake backend: preset:NAME or a node-spec YAML file.")
@click.option("--config-file", envvar=["GFD_CONFIG_FILE", "CONFIG_FILE"], help="NVIDIA v1 config file.")
@click.option("--mig-strategy", help="none | single | mixed | dynamic (env GFD_MIG_STRATEGY, MIG_STRATEGY).")
@click.option("--fail-on-init-error/--no-fail-on-init-error", default=None, help="Fail when no GPU is found.")
@click.option("--driver-root", "--nvidia-driver-root", envvar="NVIDIA_DRIVER_ROOT", help="Driver root (host paths).")
@click.option("--oneshot", is_flag=True, default=None, help="Label once and exit (env GFD_ONESHOT).")
@click.option("--no-timestamp", is_flag=True, default=None, help="Omit nvidia.com/gfd.timestamp.")
@click.option("--sleep-interval", help="Time between passes: a Go duration (60s, 1m30s) or 'infinite'.")
@click.option("--output-file", "--output", "-o", help="features.d file; '-' or '' for standard output.")
@click.option("--machine-type-file", help="File holding the machine type (default: what the backend reports).")
@click.option("--use-node-feature-api/--no-use-node-feature-api", default=None, help="NodeFeature object via the API.")
@click.option(
    "--node-feature",
    type=click.Choice(["yaml", "apply"]),
    help="Emit the NodeFeature object: as YAML (stdout or --output-file), or apply it through the API.",
)
@click.option("--node-name", envvar="NODE_NAME", help="Node name for the NodeFeature object (default: discovered).")
@click.option("--namespace", envvar="NAMESPACE", default="default", show_default=True, help="NodeFeature namespace.")
@click.option("--quiet", "-q", is_flag=True, help="Log warnings and errors only.")
@node_config_options
def labels(
    backend: str,
    node_spec: str | None,
    config_file: str | None,
    node_feature: str | None,
    node_name: str | None,
    namespace: str,
    quiet: bool,
    config_file_srcdir: str | None,
    node_label: str,
    default_config: str | None,
    fallback_strategies: str,
    **flags: Any,
) -> None:
    """Compute gpu-feature-discovery compatible node labels (plus gpuslice.io isolation labels)."""
    configure_logging(level=logging.WARNING if quiet else logging.INFO, node_name=node_name)
    try:
        watcher = node_config_watcher(
            config_file_srcdir, node_label, default_config, fallback_strategies, node_name, config_file
        )
        if watcher is not None:
            config_file = chosen_file(watcher)
    except NodeConfigError as exc:
        raise click.ClickException(str(exc)) from exc
    options = LabelOptions(
        backend=backend,
        node_spec=node_spec,
        config_file=config_file,
        flag_overrides={_FLAG_KEYS[name]: value for name, value in flags.items() if value is not None},
        node_feature=cast(NodeFeatureMode | None, node_feature),
        node_name=node_name,
        namespace=namespace,
        environ=dict(os.environ),
        backend_factory=make_backend,
    )
    control = LoopControl()

    def stop(*_: object) -> None:
        control.request_stop()
        _end_api_requests()  # a pass blocked on a slow API server ends now, not at its deadline

    # Installed before the first load, so an early SIGHUP or SIGTERM is queued rather than fatal;
    # restored afterwards so that an in-process caller (tests) gets its own handlers back.
    handlers = {
        signal.SIGHUP: lambda *_: control.request_reload(),
        signal.SIGTERM: stop,
        signal.SIGINT: stop,
    }
    previous = {signum: signal.signal(signum, handler) for signum, handler in handlers.items()}
    try:
        try:
            labeller = Labeller(lambda: load_settings(options))
        except (ConfigError, BackendInitError, NodeSpecError, NodeFeatureError, ValueError, OSError) as exc:
            raise _error(exc, flags, node_spec) from exc
        if watcher is not None:
            directory = watcher.settings.directory

            def apply(choice: NodeConfigChoice) -> bool:
                # Applied by the labelling loop, as SIGHUP is; a config that fails to load is logged there
                # and the previous one kept.
                path = choice.path(directory)
                options.config_file = None if path is None else str(path)
                control.request_reload()
                return True

            watcher.start(apply)
        status = labeller.run(control)
    finally:
        if watcher is not None:
            watcher.stop()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    sys.exit(status)


def _end_api_requests() -> None:
    # Only when a client exists: the API client's modules stay unloaded for file-only label writers.
    if "gpuslice.kube.client" in sys.modules:
        from gpuslice.kube import close_all_clients

        close_all_clients()
