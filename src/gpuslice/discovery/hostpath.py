"""Host-path discovery: GPUs from /proc/driver/nvidia, /dev and /sys under a configurable root, without NVML."""

from __future__ import annotations

import logging
import re
import socket
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from gpuslice.discovery.backend import Backend
from gpuslice.discovery.capabilities import TimeSliceControl
from gpuslice.discovery.timeslice import NvidiaSmiTimeSlice
from gpuslice.discovery.xid import XidEvent
from gpuslice.gpu import ComputeCapability, Gpu, Node
from gpuslice.records import record

log = logging.getLogger(__name__)

NVIDIA_VENDOR = 0x10DE
# PCI class codes (upper 16 bits of the 24-bit class): 0x0302 3D controller, 0x0300 VGA controller.
GPU_PCI_CLASSES = (0x0302, 0x0300)
UNKNOWN_CAPABILITY = ComputeCapability(0, 0)

# Product name pattern -> (nominal memory MiB, compute capability). Host paths name the model but not its
# memory or compute capability; these are the data-sheet figures (NVML reports a little less memory).
# Most specific patterns first: the first match wins.
_KNOWN_PRODUCTS: tuple[tuple[str, int, str], ...] = (
    (r"\bH200\b", 141 * 1024, "9.0"),
    (r"\bH100 NVL\b", 94 * 1024, "9.0"),
    (r"\bH100\b.*\b94GB\b", 94 * 1024, "9.0"),
    (r"\bH(1|8)00\b", 80 * 1024, "9.0"),
    (r"\bA(1|8)00\b.*\b80GB\b", 80 * 1024, "8.0"),
    (r"\bA(1|8)00\b", 40 * 1024, "8.0"),
    (r"\bA30\b", 24 * 1024, "8.0"),
    (r"\bA10\b", 24 * 1024, "8.6"),
    (r"\bA40\b", 48 * 1024, "8.6"),
    (r"\bL40S?\b", 48 * 1024, "8.9"),
    (r"\bL4\b", 24 * 1024, "8.9"),
    (r"\bV100\b.*\b32GB\b", 32 * 1024, "7.0"),
    (r"\bV100\b", 16 * 1024, "7.0"),
    (r"\bT4\b", 16 * 1024, "7.5"),
    (r"\bP100\b.*\b12GB\b", 12 * 1024, "6.0"),
    (r"\bP100\b", 16 * 1024, "6.0"),
)

# Driver branch -> the highest CUDA driver API version it provides (CUDA toolkit release notes).
_CUDA_BY_BRANCH: dict[int, str] = {
    450: "11.0", 455: "11.1", 460: "11.2", 465: "11.3", 470: "11.4", 495: "11.5", 510: "11.6", 515: "11.7",
    520: "11.8", 525: "12.0", 530: "12.1", 535: "12.2", 545: "12.3", 550: "12.4", 555: "12.5", 560: "12.6",
    565: "12.7", 570: "12.8", 575: "12.9", 580: "13.0",
}  # fmt: skip


def normalize_bus_id(text: str | bytes) -> str:
    """A PCI address in NVML's form '00000000:18:00.0' (upper-case hex, 8-digit domain)."""
    raw = text.decode() if isinstance(text, bytes) else text
    match = re.fullmatch(r"\s*(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})\.([0-7])\s*", raw)
    if match is None:
        raise ValueError(f"not a PCI bus id: {raw!r}")
    domain, bus, device, function = match.groups()
    return f"{int(domain or '0', 16):08X}:{int(bus, 16):02X}:{int(device, 16):02X}.{function}"


def parse_information(text: str) -> dict[str, str]:
    """The 'Key: value' lines of /proc/driver/nvidia/gpus/<bus>/information."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    return fields


def parse_driver_version(text: str) -> str:
    """The kernel module version from /proc/driver/nvidia/version ('' when not found)."""
    match = re.search(r"Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)*)", text)
    return match.group(1) if match else ""


def cuda_for_driver(driver_version: str) -> str:
    """The CUDA driver version of a driver branch, or '' when the branch is not in the table."""
    major = driver_version.split(".", 1)[0]
    return _CUDA_BY_BRANCH.get(int(major), "") if major.isdigit() else ""


def known_product(name: str) -> tuple[int, ComputeCapability] | None:
    """Nominal memory (MiB) and compute capability of a product name, when it is in the table."""
    for pattern, memory_mib, capability in _KNOWN_PRODUCTS:
        if re.search(pattern, name, flags=re.IGNORECASE):
            return memory_mib, ComputeCapability.parse(capability)
    return None


def read_dmi_machine_type(root: Path) -> str:
    """The DMI product name (what gpu-feature-discovery labels as the machine), 'unknown' if unreadable."""
    try:
        text = (root / "sys/class/dmi/id/product_name").read_text().strip()
    except OSError:
        return "unknown"
    return text or "unknown"


def read_numa_node(root: Path, bus_id: str) -> int | None:
    """The NUMA node sysfs reports for a PCI device (None when unknown or -1)."""
    sysfs_name = bus_id[-12:].lower()  # '0000:18:00.0': sysfs uses a 4-digit domain
    try:
        value = int((root / "sys/bus/pci/devices" / sysfs_name / "numa_node").read_text().strip())
    except (OSError, ValueError):
        return None
    return value if value >= 0 else None


def read_pci_class(root: Path, bus_id: str) -> int | None:
    """The 24-bit PCI class code sysfs reports for a device (None when unreadable)."""
    try:
        return int((root / "sys/bus/pci/devices" / bus_id[-12:].lower() / "class").read_text().strip(), 16)
    except (OSError, ValueError):
        return None


@record
class PciGpu:
    """An NVIDIA display/3D PCI function found in sysfs."""

    bus_id: str
    device_id: int
    pci_class: int
    numa_node: int | None


def scan_pci(root: Path) -> list[PciGpu]:
    """NVIDIA GPUs (vendor 0x10de, class 0x0300xx or 0x0302xx) under root/sys/bus/pci/devices."""
    found = []
    base = root / "sys/bus/pci/devices"
    if not base.is_dir():
        return []
    for entry in sorted(base.iterdir()):
        try:
            vendor = int((entry / "vendor").read_text().strip(), 16)
            pci_class = int((entry / "class").read_text().strip(), 16)
            device_id = int((entry / "device").read_text().strip(), 16)
            bus_id = normalize_bus_id(entry.name)
        except (OSError, ValueError):
            continue
        if vendor == NVIDIA_VENDOR and pci_class >> 8 in GPU_PCI_CLASSES:
            found.append(PciGpu(bus_id, device_id, pci_class, read_numa_node(root, bus_id)))
    return found


class HostPathBackend(Backend):
    """Discovers GPUs from driver files under `root` ('/' on the host, '/host' in a container).

    Knows: model name, UUID, PCI bus id, device minor, NUMA node, driver version, which MIG instance ids
    exist. Does not know: memory and compute capability (taken from a product table, else 0), the CUDA
    version (inferred from the driver branch), MIG profiles and MIG UUIDs (NVML only).
    """

    name = "hostpath"

    def __init__(self, root: str | Path = "/", node_name: str | None = None) -> None:
        self.root = Path(root)
        self.node_name = node_name or socket.gethostname()
        self.warnings: list[str] = []

    def _warn(self, message: str) -> None:
        self.warnings.append(message)
        log.warning("hostpath: %s", message)

    def discover(self) -> Node:
        self.warnings = []
        pci = {p.bus_id: p for p in scan_pci(self.root)}
        seen: set[str] = set()
        found: list[tuple[str, Gpu]] = []
        for bus_id, info in self._information():
            seen.add(bus_id)
            gpu = self._gpu(bus_id, info, pci.get(bus_id))
            if gpu is not None:
                found.append((bus_id, gpu))
        for bus_id in sorted(set(pci) - seen):
            self._warn(f"GPU at {bus_id} has no /proc/driver/nvidia/gpus entry (driver not bound?); skipped")
        # NVML numbers GPUs in PCI bus order; do the same so indices agree across backends.
        gpus = tuple(
            replace(gpu, index=index) for index, (_, gpu) in enumerate(sorted(found, key=lambda item: item[0]))
        )
        driver = self._driver_version()
        cuda = cuda_for_driver(driver)
        if gpus and driver and not cuda:
            self._warn(f"CUDA driver version of driver {driver} unknown without NVML; left empty")
        return Node(
            name=self.node_name,
            gpus=gpus,
            driver_version=driver,
            cuda_driver_version=cuda,
            machine_type=read_dmi_machine_type(self.root),
            extra={"backend": self.name},
        )

    def timeslice_control(self) -> TimeSliceControl | None:
        return NvidiaSmiTimeSlice()  # nvidia-smi comes with the driver, NVML or not

    def device_nodes(self) -> list[str]:
        """/dev/nvidia* and /dev/nvidia-caps/* present under the root, as paths relative to it."""
        dev = self.root / "dev"
        paths = sorted(dev.glob("nvidia*")) + sorted(dev.glob("nvidia-caps/*"))
        return ["/" + str(p.relative_to(self.root)) for p in paths if not p.is_dir()]

    def watch(self, stop: threading.Event) -> Iterator[XidEvent]:
        """Host paths carry no health events: wait until stopped, yielding nothing."""
        while not stop.wait(5.0):
            pass
        yield from ()

    def _information(self) -> Iterator[tuple[str, dict[str, str]]]:
        base = self.root / "proc/driver/nvidia/gpus"
        if not base.is_dir():
            return
        for entry in sorted(base.iterdir()):
            try:
                text = (entry / "information").read_text()
                bus_id = normalize_bus_id(entry.name)
            except (OSError, ValueError) as exc:
                self._warn(f"{entry.name}: unreadable GPU information ({exc}); skipped")
                continue
            yield bus_id, parse_information(text)

    def _gpu(self, bus_id: str, info: dict[str, str], pci: PciGpu | None) -> Gpu | None:
        model = info.get("Model", "")
        uuid = info.get("GPU UUID", "")
        if info.get("GPU Excluded", "No").lower().startswith("yes"):
            self._warn(f"GPU at {bus_id} is excluded by the driver; skipped")
            return None
        if not uuid.startswith("GPU-") or "?" in uuid:
            self._warn(f"GPU at {bus_id} ({model or 'unknown model'}) reports no UUID yet ({uuid!r}); skipped")
            return None
        minor_text = info.get("Device Minor", "")
        minor = int(minor_text) if minor_text.isdigit() else None
        if minor is None:
            self._warn(f"{uuid}: no Device Minor in its information file")
        elif not (self.root / f"dev/nvidia{minor}").exists():
            self._warn(f"{uuid}: /dev/nvidia{minor} is missing under {self.root}")
        known = known_product(model)
        if known is None:
            self._warn(f"{uuid}: memory and compute capability of {model!r} unknown without NVML; reported as 0")
        memory_mib, capability = known or (0, UNKNOWN_CAPABILITY)
        mig_ids = self._mig_ids(minor) if minor is not None else []
        if mig_ids:
            listed = ", ".join(f"gi{gi}/ci{ci}" for gi, ci in mig_ids)
            self._warn(f"{uuid}: MIG instances {listed} exist; their profiles and UUIDs need NVML")
        numa = pci.numa_node if pci is not None else read_numa_node(self.root, bus_id)
        pci_class = pci.pci_class if pci is not None else read_pci_class(self.root, bus_id)
        return Gpu(
            index=0,
            uuid=uuid,
            product_name=model,
            memory_mib=memory_mib,
            compute_capability=capability,
            numa_node=numa,
            pci_bus_id=bus_id,
            minor=minor,
            mig_enabled=bool(mig_ids),
            pci_class=pci_class,
        )

    def _mig_ids(self, minor: int) -> list[tuple[int, int]]:
        """(gi, ci) pairs with access capabilities under /proc/driver/nvidia/capabilities/gpu<minor>/mig."""
        base = self.root / f"proc/driver/nvidia/capabilities/gpu{minor}/mig"
        ids = []
        for gi_dir in base.glob("gi*"):
            for ci_dir in gi_dir.glob("ci*"):
                if gi_dir.name[2:].isdigit() and ci_dir.name[2:].isdigit():
                    ids.append((int(gi_dir.name[2:]), int(ci_dir.name[2:])))
        return sorted(ids)

    def _driver_version(self) -> str:
        try:
            text = (self.root / "proc/driver/nvidia/version").read_text()
        except OSError:
            return ""
        version = parse_driver_version(text)
        if not version:
            self._warn("proc/driver/nvidia/version does not name a kernel module version")
        return version
