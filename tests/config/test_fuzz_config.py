"""Fuzzing the config loader: any text or bytes give a Config (and resources) or ConfigError/SharingError."""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from gpuslice.config import ConfigError, load_config, parse_config_text, validate_startup
from gpuslice.discovery import load_node_spec
from gpuslice.sharing import SharingError, build_resources
from tests.support.fuzz import mutated, yaml_documents

KEYS = [
    "version",
    "flags",
    "migStrategy",
    "failOnInitError",
    "plugin",
    "deviceListStrategy",
    "deviceIDStrategy",
    "passDeviceSpecs",
    "sharing",
    "timeSlicing",
    "mps",
    "resources",
    "name",
    "replicas",
    "devices",
    "rename",
    "renameByDefault",
    "failRequestsGreaterThanOne",
    "gpuslice",
    "model",
    "honorDevices",
    "allowSingleReplica",
    "healthRecovery",
    "mpsRoot",
    "nvidiaDriverRoot",
    "gfd",
    "sleepInterval",
]
VALID = (
    "version: v1\nflags:\n  migStrategy: mixed\n  plugin:\n    deviceListStrategy: [envvar, cdi-annotations]\n"
    "sharing:\n  timeSlicing:\n    renameByDefault: true\n    resources:\n      - name: gpu\n        replicas: 4\n"
    "        devices: [0, 1]\n"
)
NODE = load_node_spec("preset:h100x4-mig").node


def load_and_build(text: str) -> None:
    """What the plugin does with a config at start and on reload; only the typed errors may escape."""
    try:
        config = parse_config_text(text, "fuzz.yaml").config
        validate_startup(config)
        build_resources(NODE, config)
    except (ConfigError, SharingError):
        pass


@given(yaml_documents(KEYS))
def test_fuzz_config_shapes(text: str) -> None:
    load_and_build(text)


@given(st.one_of(mutated(VALID.encode()), st.binary(max_size=512)))
def test_fuzz_config_file_bytes(data: bytes) -> None:
    with tempfile.TemporaryDirectory(prefix="gs") as folder:
        path = Path(folder) / "config.yaml"
        path.write_bytes(data)
        with contextlib.suppress(ConfigError):
            load_config(path)
