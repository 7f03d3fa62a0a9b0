"""Shared by the node-config tests: a directory of named configs, waiting for a condition, metric samples."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from prometheus_client import CollectorRegistry

from gpuslice.config.node_config import DEFAULT_NODE_LABEL, NodeConfigSettings

LABEL = DEFAULT_NODE_LABEL
NODE = "gpu-node-1"
WAIT_S = 10.0


def config_dir(root: Path, names: tuple[str, ...] = ("a100", "l4", "default")) -> Path:
    directory = root / "available-configs"
    directory.mkdir()
    for name in names:
        (directory / name).write_text("version: v1\n")
    return directory


def settings(directory: Path, default: str | None = None) -> NodeConfigSettings:
    return NodeConfigSettings(directory, NODE, LABEL, default)


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)
