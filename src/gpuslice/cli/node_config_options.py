"""The per-node config options that `gpuslice plugin` and `gpuslice labels` share (NVIDIA's config-manager names)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from gpuslice.config.node_config import (
    DEFAULT_FALLBACK_STRATEGIES,
    DEFAULT_NODE_LABEL,
    NodeConfigError,
    NodeConfigSettings,
    parse_fallbacks,
)

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from gpuslice.nodeconfig import NodeConfigWatcher


def node_config_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--config-file-srcdir, --node-label, --default-config, --fallback-strategies (and their env vars)."""
    options = [
        click.option(
            "--config-file-srcdir",
            envvar="CONFIG_FILE_SRCDIR",
            default=None,
            help="Per-node configs: a directory of named config files (a mounted ConfigMap); the node label "
            "picks one. Not with --config-file.",
        ),
        click.option(
            "--node-label",
            envvar="NODE_LABEL",
            default=DEFAULT_NODE_LABEL,
            show_default=True,
            help="Per-node configs: the node label whose value names the config.",
        ),
        click.option(
            "--default-config",
            envvar="DEFAULT_CONFIG",
            default=None,
            help="Per-node configs: the config of a node without the label.",
        ),
        click.option(
            "--fallback-strategies",
            envvar="FALLBACK_STRATEGIES",
            default=",".join(DEFAULT_FALLBACK_STRATEGIES),
            show_default=True,
            help="Per-node configs without a default: tried in order; named (a config called 'default'), "
            "single (the only config), empty (built-in defaults).",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def node_config_watcher(
    config_file_srcdir: str | None,
    node_label: str,
    default_config: str | None,
    fallback_strategies: str,
    node_name: str | None,
    config_file: str | None,
    metrics_registry: CollectorRegistry | None = None,
) -> NodeConfigWatcher | None:
    """The watcher when per-node configs are on (CONFIG_FILE_SRCDIR set), else None; NodeConfigError if misused.

    With `metrics_registry` the watcher reports there (gpuslice_node_config_*, and the API client's
    gpuslice_kube_api_*). The watcher's modules load only when per-node configs are on.
    """
    if not config_file_srcdir:
        return None
    if config_file:
        raise NodeConfigError(
            "--config-file (CONFIG_FILE) and --config-file-srcdir (CONFIG_FILE_SRCDIR) exclude each other: "
            "with per-node configs the node label chooses the file"
        )
    settings = NodeConfigSettings(
        Path(config_file_srcdir),
        node_name or "",
        node_label,
        default_config or None,
        parse_fallbacks(fallback_strategies),
    )
    from gpuslice.nodeconfig import NodeConfigMetrics, NodeConfigWatcher
    from gpuslice.nodeconfig.kube import LightkubeNodeSource  # the Kubernetes client only when asked for

    observer = None
    if metrics_registry is not None:
        from gpuslice.kube.metrics import register_api_metrics

        observer = NodeConfigMetrics(metrics_registry)
        register_api_metrics(metrics_registry)
    return NodeConfigWatcher(settings, LightkubeNodeSource(), observer)


def chosen_file(watcher: NodeConfigWatcher) -> str | None:
    """The config file the node starts with (None: the empty config); NodeConfigError when there is none."""
    path = watcher.initial_choice().path(watcher.settings.directory)
    return None if path is None else str(path)
