"""Builds a fake host root (proc, dev, sys) in a directory, as the NVIDIA driver lays it out."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

H100_UUID = "GPU-5ad9cf43-2f2b-4c11-8f8e-0a1b2c3d4e5f"
A100_UUID = "GPU-0b7c5d2e-1111-4222-8333-944455566677"
UNKNOWN_UUID = "GPU-77777777-8888-4999-aaaa-bbbbbbbbbbbb"


@dataclass(frozen=True)
class HostGpu:
    bus: str  # sysfs form, e.g. 0000:3b:00.0
    model: str
    uuid: str
    minor: int
    numa: int = 0
    excluded: bool = False


DEFAULT_GPUS = (
    # Listed out of bus order on purpose: discovery must number GPUs by PCI bus id, as NVML does.
    HostGpu("0000:86:00.0", "NVIDIA A100-SXM4-80GB", A100_UUID, minor=1, numa=1),
    HostGpu("0000:3b:00.0", "NVIDIA H100 80GB HBM3", H100_UUID, minor=0, numa=0),
    HostGpu("0000:d8:00.0", "NVIDIA Imaginary X1", UNKNOWN_UUID, minor=2, numa=-1),
)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def information(gpu: HostGpu) -> str:
    return (
        f"Model: \t\t {gpu.model}\nIRQ:   \t\t 263\nGPU UUID: \t {gpu.uuid}\nVideo BIOS: \t 96.00.30.00.01\n"
        f"Bus Type: \t PCIe\nDMA Size: \t 52 bits\nDMA Mask: \t 0xfffffffffffff\nBus Location: \t {gpu.bus}\n"
        f"Device Minor: \t {gpu.minor}\nGPU Excluded:\t {'Yes' if gpu.excluded else 'No'}\n"
    )


def pci_device(root: Path, bus: str, vendor: int, pci_class: int, device: int, numa: int) -> None:
    base = root / "sys/bus/pci/devices" / bus
    _write(base / "vendor", f"0x{vendor:04x}\n")
    _write(base / "class", f"0x{pci_class:06x}\n")
    _write(base / "device", f"0x{device:04x}\n")
    _write(base / "numa_node", f"{numa}\n")


def build_host_root(root: Path, gpus: tuple[HostGpu, ...] = DEFAULT_GPUS, driver: str = "550.54.15") -> Path:
    """A host tree with `gpus`, an NVSwitch bridge, a non-NVIDIA NIC, and the usual device nodes."""
    _write(
        root / "proc/driver/nvidia/version",
        f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {driver}  Tue Mar  5 22:23:56 UTC 2024\n"
        "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n",
    )
    _write(root / "dev/nvidiactl", "")
    _write(root / "dev/nvidia-uvm", "")
    _write(root / "dev/nvidia-caps/nvidia-cap1", "")
    _write(root / "dev/nvidia-caps/nvidia-cap2", "")
    _write(root / "sys/class/dmi/id/product_name", "DGX H100\n")
    for gpu in gpus:
        _write(root / "proc/driver/nvidia/gpus" / gpu.bus / "information", information(gpu))
        _write(root / f"dev/nvidia{gpu.minor}", "")
        pci_device(root, gpu.bus, 0x10DE, 0x030200, 0x2330, gpu.numa)
    pci_device(root, "0000:05:00.0", 0x10DE, 0x068000, 0x22A3, 0)  # an NVSwitch: a bridge, not a GPU
    pci_device(root, "0000:17:00.0", 0x15B3, 0x020000, 0x101B, 0)  # a Mellanox NIC
    return root
