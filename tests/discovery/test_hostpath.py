"""Host-path discovery against a fake host root: what the driver's files tell, and what they cannot."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from gpuslice.discovery.hostpath import (
    HostPathBackend,
    cuda_for_driver,
    known_product,
    normalize_bus_id,
    parse_driver_version,
    parse_information,
)
from gpuslice.discovery.mig_minors import load_mig_minors, parse_mig_minors
from gpuslice.gpu import ComputeCapability
from tests.discovery.host_root import (
    A100_UUID,
    H100_UUID,
    UNKNOWN_UUID,
    HostGpu,
    build_host_root,
    information,
    pci_device,
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("0000:3b:00.0", "00000000:3B:00.0"),
        ("00000000:3B:00.0", "00000000:3B:00.0"),
        ("3b:00.0", "00000000:3B:00.0"),
        (b"0001:c1:1f.7", "00000001:C1:1F.7"),
    ],
)
def test_bus_ids_take_nvml_form(raw: str | bytes, expected: str) -> None:
    assert normalize_bus_id(raw) == expected


def test_bad_bus_id_is_named() -> None:
    with pytest.raises(ValueError, match="not a PCI bus id: 'gpu0'"):
        normalize_bus_id("gpu0")


def test_information_file_fields() -> None:
    fields = parse_information(information(HostGpu("0000:3b:00.0", "NVIDIA H100 80GB HBM3", H100_UUID, 4)))
    assert fields["Model"] == "NVIDIA H100 80GB HBM3"
    assert fields["GPU UUID"] == H100_UUID
    assert fields["Bus Location"] == "0000:3b:00.0"
    assert fields["Device Minor"] == "4"
    assert fields["IRQ"] == "263"


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024", "550.54.15"),
        ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.124.06  Release Build", "570.124.06"),
        ("NVRM version: NVIDIA UNIX aarch64 Kernel Module  535.104  Sat Aug 19 2023", "535.104"),
        ("garbage", ""),
    ],
)
def test_driver_version(text: str, version: str) -> None:
    assert parse_driver_version(text) == version


@pytest.mark.parametrize(
    ("driver", "cuda"), [("550.54.15", "12.4"), ("535.104.05", "12.2"), ("580.65.06", "13.0"), ("999.1", ""), ("", "")]
)
def test_cuda_version_inferred_from_branch(driver: str, cuda: str) -> None:
    assert cuda_for_driver(driver) == cuda


@pytest.mark.parametrize(
    ("name", "memory_mib", "capability"),
    [
        ("NVIDIA H100 80GB HBM3", 81920, "9.0"),
        ("NVIDIA H100 NVL", 96256, "9.0"),
        ("NVIDIA H200", 144384, "9.0"),
        ("NVIDIA A100-SXM4-80GB", 81920, "8.0"),
        ("NVIDIA A100-SXM4-40GB", 40960, "8.0"),
        ("NVIDIA A10", 24576, "8.6"),
        ("NVIDIA L4", 24576, "8.9"),
        ("Tesla V100-SXM2-32GB", 32768, "7.0"),
        ("Tesla T4", 16384, "7.5"),
    ],
)
def test_known_products(name: str, memory_mib: int, capability: str) -> None:
    assert known_product(name) == (memory_mib, ComputeCapability.parse(capability))


def test_unknown_product_is_none() -> None:
    assert known_product("NVIDIA Imaginary X1") is None


MIG_MINORS = (
    "config 1\nmonitor 2\ngpu0/gi0/access 3\ngpu0/gi0/ci0/access 4\ngpu1/gi2/access 156\ngpu1/gi2/ci0/access 157\n"
)


def test_mig_minors_parse() -> None:
    minors = parse_mig_minors(MIG_MINORS)
    assert (minors.config, minors.monitor) == (1, 2)
    assert minors.gi_minor(1, 2) == 156
    assert minors.ci_minor(1, 2, 0) == 157


def test_mig_minors_fallback_is_the_standard_layout() -> None:
    standard = load_mig_minors(Path("/nonexistent-root"))
    assert not standard.from_file
    # config 1, monitor 2, then 9 minors per GI and 135 per GPU, so the file above agrees with the formula.
    assert standard.gi_minor(1, 2) == 156
    assert standard.ci_minor(1, 2, 0) == 157
    assert standard.ci_minor(0, 0, 7) == 11


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("config one", "line 1: expected '<name> <minor>'"),
        ("config 1\ngpu0/gx1/access 5", "line 2: unknown capability"),
    ],
)
def test_bad_mig_minors_name_the_line(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_mig_minors(text)


def test_discovers_gpus_in_bus_order(tmp_path: Path) -> None:
    backend = HostPathBackend(build_host_root(tmp_path), node_name="n1")
    node = backend.discover()
    assert [g.uuid for g in node.gpus] == [H100_UUID, A100_UUID, UNKNOWN_UUID]
    assert [g.index for g in node.gpus] == [0, 1, 2]
    assert [g.pci_bus_id for g in node.gpus] == ["00000000:3B:00.0", "00000000:86:00.0", "00000000:D8:00.0"]
    assert [g.minor for g in node.gpus] == [0, 1, 2]
    assert [g.numa_node for g in node.gpus] == [0, 1, None]
    assert (node.name, node.driver_version, node.cuda_driver_version) == ("n1", "550.54.15", "12.4")
    assert node.machine_type == "DGX H100"
    assert node.extra == {"backend": "hostpath"}


def test_unknown_model_has_zero_memory_and_a_warning(tmp_path: Path) -> None:
    backend = HostPathBackend(build_host_root(tmp_path))
    h100, a100, unknown = backend.discover().gpus
    assert (h100.memory_mib, str(h100.compute_capability)) == (81920, "9.0")
    assert (a100.memory_mib, str(a100.compute_capability)) == (81920, "8.0")
    assert (unknown.memory_mib, unknown.compute_capability) == (0, ComputeCapability(0, 0))
    assert any("'NVIDIA Imaginary X1' unknown without NVML" in w for w in backend.warnings)


def test_gpus_without_identity_are_skipped_with_reasons(tmp_path: Path) -> None:
    gpus = (
        HostGpu("0000:3b:00.0", "NVIDIA H100 80GB HBM3", H100_UUID, 0),
        HostGpu("0000:5e:00.0", "NVIDIA H100 80GB HBM3", "GPU-????????-????-????-????-????????????", 1),
        HostGpu("0000:86:00.0", "NVIDIA A100-SXM4-80GB", A100_UUID, 2, excluded=True),
    )
    root = build_host_root(tmp_path, gpus)
    pci_device(root, "0000:af:00.0", 0x10DE, 0x030000, 0x2330, 1)  # bound to no driver: no /proc entry
    backend = HostPathBackend(root)
    assert [g.uuid for g in backend.discover().gpus] == [H100_UUID]
    warnings = "\n".join(backend.warnings)
    assert "00000000:5E:00.0 (NVIDIA H100 80GB HBM3) reports no UUID yet" in warnings
    assert "00000000:86:00.0 is excluded by the driver" in warnings
    assert "00000000:AF:00.0 has no /proc/driver/nvidia/gpus entry" in warnings


def test_missing_device_node_is_warned(tmp_path: Path) -> None:
    root = build_host_root(tmp_path)
    (root / "dev/nvidia1").unlink()
    backend = HostPathBackend(root)
    assert len(backend.discover().gpus) == 3
    assert any(f"{A100_UUID}: /dev/nvidia1 is missing" in w for w in backend.warnings)


def test_mig_instances_are_seen_but_not_named(tmp_path: Path) -> None:
    root = build_host_root(tmp_path)
    for gi, ci in [(1, 0), (2, 0)]:
        access = root / f"proc/driver/nvidia/capabilities/gpu1/mig/gi{gi}/ci{ci}/access"
        access.parent.mkdir(parents=True)
        access.write_text(f"DeviceFileMinor: {150 + gi}\nDeviceFileMode: 292\nDeviceFileModify: 1\n")
    backend = HostPathBackend(root)
    gpus = backend.discover().gpus
    assert [g.mig_enabled for g in gpus] == [False, True, False]
    assert gpus[1].mig_instances == ()
    assert any(
        "MIG instances gi1/ci0, gi2/ci0 exist; their profiles and UUIDs need NVML" in w for w in backend.warnings
    )


def test_empty_root_finds_nothing(tmp_path: Path) -> None:
    node = HostPathBackend(tmp_path).discover()
    assert node.gpus == ()
    assert (node.driver_version, node.cuda_driver_version, node.machine_type) == ("", "", "unknown")


def test_device_nodes_under_root(tmp_path: Path) -> None:
    nodes = HostPathBackend(build_host_root(tmp_path)).device_nodes()
    assert nodes == [
        "/dev/nvidia-uvm",
        "/dev/nvidia0",
        "/dev/nvidia1",
        "/dev/nvidia2",
        "/dev/nvidiactl",
        "/dev/nvidia-caps/nvidia-cap1",
        "/dev/nvidia-caps/nvidia-cap2",
    ]


def test_watch_yields_nothing_and_returns_when_stopped(tmp_path: Path) -> None:
    stop = threading.Event()
    stop.set()
    assert list(HostPathBackend(tmp_path).watch(stop)) == []
