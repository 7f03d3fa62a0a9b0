"""The CDI spec file: NVIDIA's kind and file name, one device per GPU/MIG device plus `all`, atomic writes."""

from __future__ import annotations

import json
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuslice.allocation.cdi import (
    GPU_KIND,
    GPU_SPEC_FILE,
    IMEX_SPEC_FILE,
    CdiError,
    gpu_spec,
    imex_spec,
    spec_problems,
    write_spec,
)
from gpuslice.allocation.cdi_specs import CdiSettings, CdiSpecUpkeep, build_specs
from gpuslice.discovery import load_node_spec
from gpuslice.gpu import Node
from tests.support.dirs import short_temp_dir


def node(preset: str) -> Node:
    return load_node_spec(f"preset:{preset}").node


@pytest.fixture
def cdi_dir() -> Iterator[Path]:
    with short_temp_dir("gs-cdi-") as path:
        yield path / "cdi"


def names(spec: dict[str, Any]) -> list[str]:
    return [device["name"] for device in spec["devices"]]


def nodes_of(spec: dict[str, Any], name: str) -> list[str]:
    (device,) = [d for d in spec["devices"] if d["name"] == name]
    return [entry["path"] for entry in device["containerEdits"]["deviceNodes"]]


def test_whole_gpus_by_uuid() -> None:
    h100 = node("h100x4")
    spec = gpu_spec(h100)
    assert spec["cdiVersion"] == "0.5.0", "index names start with a digit: 0.5.0 is the lowest that takes them"
    assert spec["kind"] == "k8s.device-plugin.nvidia.com/gpu" == GPU_KIND
    assert names(spec) == [name for gpu in h100.gpus for name in (gpu.uuid, str(gpu.index))] + ["all"]
    assert nodes_of(spec, h100.gpus[2].uuid) == ["/dev/nvidia2"]
    assert nodes_of(spec, "all") == [f"/dev/nvidia{i}" for i in range(4)]
    assert spec["containerEdits"]["env"] == ["NVIDIA_VISIBLE_DEVICES=void"]
    assert [n["path"] for n in spec["containerEdits"]["deviceNodes"]][:3] == [
        "/dev/nvidiactl",
        "/dev/nvidia-uvm",
        "/dev/nvidia-uvm-tools",
    ]
    assert all("hostPath" not in n for n in spec["containerEdits"]["deviceNodes"]), "dev root / needs no host path"
    assert spec_problems(spec) == []


def test_mig_devices_by_index_with_their_capability_nodes() -> None:
    h100 = node("h100x4-mig")
    spec = gpu_spec(h100, "index")
    first = h100.gpus[0]
    assert names(spec)[:5] == ["0", first.uuid, "0:0", first.mig_instances[0].uuid, "0:1"]
    mig = h100.gpus[1].mig_instances[3]
    assert nodes_of(spec, "1:3") == [
        "/dev/nvidia1",
        f"/dev/nvidia-caps/nvidia-cap{mig.gi_cap_minor}",
        f"/dev/nvidia-caps/nvidia-cap{mig.ci_cap_minor}",
    ]
    assert len(nodes_of(spec, "all")) == 4 + 4 * 7 * 2
    assert nodes_of(spec, mig.uuid) == nodes_of(spec, "1:3")
    assert spec_problems(spec) == []


def test_host_paths_follow_the_dev_root() -> None:
    spec = gpu_spec(node("h100x4"), dev_root="/run/nvidia/driver/")
    entry = spec["devices"][0]["containerEdits"]["deviceNodes"][0]
    assert entry == {"path": "/dev/nvidia0", "hostPath": "/run/nvidia/driver/dev/nvidia0"}


def test_imex_channel_spec() -> None:
    spec = imex_spec([0])
    assert spec["kind"] == "k8s.device-plugin.nvidia.com/imex-channel"
    assert nodes_of(spec, "0") == ["/dev/nvidia-caps-imex-channels/channel0"]


def test_specs_are_written_atomically_as_json_with_nvidias_file_names(cdi_dir: Path) -> None:
    h100 = node("h100x4")
    (cdi_dir).mkdir(parents=True)
    (cdi_dir / GPU_SPEC_FILE).write_text("stale")
    settings = CdiSettings(imex_channels=(0,))
    written = CdiSpecUpkeep(cdi_dir).write(build_specs(h100, settings))
    assert written == (cdi_dir / GPU_SPEC_FILE, cdi_dir / IMEX_SPEC_FILE)
    assert GPU_SPEC_FILE == "k8s.device-plugin.nvidia.com-gpu.json"
    assert json.loads((cdi_dir / GPU_SPEC_FILE).read_text()) == build_specs(h100, settings).specs[GPU_SPEC_FILE]
    assert stat.S_IMODE((cdi_dir / GPU_SPEC_FILE).stat().st_mode) == 0o644
    assert sorted(p.name for p in cdi_dir.iterdir()) == sorted([GPU_SPEC_FILE, IMEX_SPEC_FILE]), "no temp files left"


def test_no_imex_file_without_channels_and_no_gpu_file_without_gpus(cdi_dir: Path) -> None:
    assert CdiSpecUpkeep(cdi_dir).write(build_specs(Node("empty", ()), CdiSettings())) == ()
    assert CdiSpecUpkeep(cdi_dir).write(build_specs(node("h100x4"), CdiSettings())) == (cdi_dir / GPU_SPEC_FILE,)


def test_an_unwritable_directory_is_a_clear_error(cdi_dir: Path) -> None:
    cdi_dir.parent.mkdir(exist_ok=True)
    cdi_dir.write_text("a file, not a directory")
    with pytest.raises(CdiError, match="cannot write CDI spec into"):
        write_spec(cdi_dir, GPU_SPEC_FILE, gpu_spec(node("h100x4")))
