"""Hostile config files: bad bytes, oversize, alias bombs and runaway counts are refused naming file, key and limit."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from gpuslice.config import ConfigError, load_config, parse_config_text
from gpuslice.config.limits import MAX_CONFIG_BYTES, MAX_DEVICES_PER_RESOURCE, MAX_REPLICAS
from gpuslice.discovery import load_node_spec
from gpuslice.plugin.convert import device_list
from gpuslice.sharing import SharingError, build_resources
from gpuslice.wire import MAX_REQUEST_BYTES
from tests.support.hostile import BOMB

TS = "sharing:\n  timeSlicing:\n    resources:\n"


def write(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "config.yaml"
    path.write_bytes(data)
    return path


def test_non_utf8_config_names_the_file_byte_and_offset(tmp_path: Path) -> None:
    path = write(tmp_path, b"version: v1\nflags: {migStrategy: \x80}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value) == f"invalid config {path}: not UTF-8 text (byte 0x80 at offset 33)"


def test_oversize_config_names_the_limit(tmp_path: Path) -> None:
    path = write(tmp_path, b"# " + b"x" * MAX_CONFIG_BYTES + b"\n")
    with pytest.raises(ConfigError, match=f"invalid config {path}: larger than the limit of {MAX_CONFIG_BYTES} bytes"):
        load_config(path)


def test_an_alias_bomb_is_refused_quickly_naming_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, BOMB.encode())
    started = time.perf_counter()
    with pytest.raises(ConfigError, match=f"unable to parse config file {path}: .*expands to more than"):
        load_config(path)
    assert time.perf_counter() - started < 5.0


def test_replicas_over_the_cap_name_the_key_and_limit() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config_text(TS + "    - name: gpu\n      replicas: 100000000\n", "c.yaml")
    assert "sharing.timeSlicing.resources[0].replicas" in str(caught.value)
    assert f"over the limit of {MAX_REPLICAS}" in str(caught.value)
    parse_config_text(TS + f"    - name: gpu\n      replicas: {MAX_REPLICAS}\n")  # the cap itself is allowed


def test_a_resource_over_the_device_cap_is_refused_before_it_is_built() -> None:
    node = load_node_spec("preset:dgx-h100").node  # 8 GPUs x 16,384 replicas = 131,072 devices
    config = parse_config_text(TS + f"    - name: gpu\n      replicas: {MAX_REPLICAS}\n").config
    started = time.perf_counter()
    with pytest.raises(
        SharingError, match=f"nvidia.com/gpu: .* = 131072 devices is over the limit of {MAX_DEVICES_PER_RESOURCE}"
    ):
        build_resources(node, config)
    assert time.perf_counter() - started < 5.0


def test_the_device_cap_fits_the_kubelets_message_with_margin(tmp_path: Path) -> None:
    """The cap's derivation, checked: the longest IDs (MIG replicas), all unhealthy, NUMA set, at the cap."""
    gpu = "{model: NVIDIA H100 80GB HBM3, count: 8, memory_mib: 81559, compute_capability: '9.0', numa_node: 1"
    (tmp_path / "n.yaml").write_text(f"name: n\ngpus: [{gpu}, mig: [{', '.join(['1g.10gb'] * 7)}]}}]\n")
    node = load_node_spec(str(tmp_path / "n.yaml")).node
    replicas = MAX_DEVICES_PER_RESOURCE // 56  # 56 MIG devices
    config = parse_config_text(
        "flags: {migStrategy: single}\n" + TS + f"    - name: gpu\n      replicas: {replicas}\n"
    ).config
    (resource,) = build_resources(node, config).resources
    assert len(resource.devices) > MAX_DEVICES_PER_RESOURCE * 0.99
    message = device_list(resource, {device.id for device in resource.devices})
    assert message.ByteSize() * 3 < MAX_REQUEST_BYTES, "keep a 3x margin under the kubelet's 4 MiB"
