"""The one served-config builder: config source -> overrides -> validate -> backend -> discover -> plan."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

from gpuslice.config import Config, ConfigError, apply_overrides, load_config, validate_startup
from gpuslice.discovery import Backend, BackendInitError, make_backend
from gpuslice.gpu import Node
from gpuslice.records import record
from gpuslice.sharing import SharingError, SharingPlan, build_resources

ConfigSource = str | Path | None  # a config file; None: the defaults
BackendFor = Callable[[Config], Backend]  # builds the backend once the config (driver root, ...) is known


class ServedConfigError(ValueError):
    """A config source that cannot serve; the message names the key or file (exit code 2 at start)."""


@record
class ServedNode:
    """A validated config, the node as discovered, and the sharing plan built from both."""

    config: Config
    node: Node
    plan: SharingPlan
    backend: Backend
    source: str  # where the config came from, as messages name it
    warnings: tuple[str, ...]


def backend_from_flags(kind: str, node_spec: str | None, node_name: str | None = None) -> BackendFor:
    """A BackendFor that builds the backend `kind` names from the config's driver-root flags."""

    def build(config: Config) -> Backend:
        flags = config.flags
        try:
            return make_backend(kind, node_spec, flags.nvidia_driver_root, flags.fail_on_init_error,
                                node_name=node_name)  # fmt: skip
        except BackendInitError as exc:
            raise ServedConfigError(str(exc)) from exc

    return build


def use_backend(backend: Backend) -> BackendFor:
    """A BackendFor that answers the backend already running (a reload, or one a caller built)."""
    return lambda _config: backend


def build_served(
    source: ConfigSource,
    backend: BackendFor,
    *,
    overrides: Mapping[str, Any] | None = None,
    claimed_gpus: Collection[str] | Callable[[Config, Node], Collection[str]] = (),
    check: Callable[[Config, str], None] | None = None,
    adjust_node: Callable[[Node], Node] | None = None,
) -> ServedNode:
    """Everything a front end serves from `source`; ServedConfigError on any bad input, nothing changed.

    `overrides`: NVIDIA's flags and env vars that were set (they win over the file). `backend`: how to
    get the backend once the config is known (a reload: use_backend). `claimed_gpus`: GPUs whose
    dynamic-MIG placements a checkpoint holds (they stay dynamic), or how to find them from the config
    and the discovered node. `check`: the front end's own rule on the config (raises ConfigError).
    `adjust_node`: what a reload keeps of the served node.
    """
    try:
        loaded = load_config(source)
        config = apply_overrides(loaded.config, overrides or {}, loaded.source)
        validate_startup(config)
        if check is not None:
            check(config, loaded.source)
    except ConfigError as exc:
        raise ServedConfigError(str(exc)) from exc
    chosen = backend(config)
    try:
        node = chosen.discover()
        if adjust_node is not None:
            node = adjust_node(node)
        claimed = claimed_gpus(config, node) if callable(claimed_gpus) else claimed_gpus
        plan = build_resources(node, config, claimed)
    except SharingError as exc:
        raise ServedConfigError(f"config {loaded.source}: {exc}") from exc
    return ServedNode(config, node, plan, chosen, loaded.source, loaded.warnings + plan.warnings)
