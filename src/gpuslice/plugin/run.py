"""The plugin's served node: config, backend, node and plan from its flags, checked (plugin.app assembles the rest)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpuslice.config import Config
from gpuslice.discovery import Backend
from gpuslice.gpu import Node
from gpuslice.node.served import ServedConfigError, ServedNode, backend_from_flags, build_served, use_backend
from gpuslice.sharing import dynamic as dynamic_mig  # its checkpoint module loads only under dynamic MIG
from gpuslice.sharing import is_dynamic

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
        return (
            dynamic_mig.claimed_gpus(Path(mig_checkpoint), node.name)
            if is_dynamic(config) and mig_checkpoint
            else frozenset()
        )

    try:
        served = build_served(config_file, make, overrides=overrides, claimed_gpus=claimed)
    except ServedConfigError as exc:
        raise SetupError(str(exc)) from exc
    return served
