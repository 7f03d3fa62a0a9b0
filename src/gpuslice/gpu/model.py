"""The GPU vocabulary shared by the device plugin and the simulator: GPUs, MIG instances, nodes."""

from __future__ import annotations

import re
from dataclasses import field

from gpuslice.records import record

# Compute-capability major -> NVIDIA architecture family, as gpu-feature-discovery names them.
_FAMILY_BY_MAJOR = {
    1: "tesla",
    2: "fermi",
    3: "kepler",
    5: "maxwell",
    6: "pascal",
    9: "hopper",
    10: "blackwell",
    12: "blackwell",
    13: "rubin",
}


@record(order=True)
class ComputeCapability:
    """A CUDA compute capability such as 9.0."""

    major: int
    minor: int

    @classmethod
    def parse(cls, text: str) -> ComputeCapability:
        match = re.fullmatch(r"\s*(\d+)\.(\d+)\s*", str(text))
        if match is None:
            raise ValueError(f"compute capability must look like '<major>.<minor>', got {text!r}")
        return cls(int(match.group(1)), int(match.group(2)))

    @property
    def family(self) -> str:
        """Architecture family name ('undefined' when unknown)."""
        if self.major == 7:
            return "volta" if self.minor < 5 else "turing"
        if self.major == 8:
            return "ampere" if self.minor < 9 else "ada-lovelace"
        return _FAMILY_BY_MAJOR.get(self.major, "undefined")

    @property
    def mig_capable(self) -> bool:
        return self.major >= 8

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


@record
class MigInstance:
    """One MIG device: a GPU instance (with one full-size compute instance) on a parent GPU."""

    profile: str  # GI profile name, e.g. "1g.10gb" or "1g.10gb+me"
    uuid: str  # "MIG-<uuid>"
    parent_uuid: str
    parent_index: int
    index: int  # position among the parent's MIG devices (the "<gpu>:<mig>" index)
    gi: int  # GPU instance id
    ci: int  # compute instance id
    placement_start: int  # first memory slice
    placement_size: int  # memory slices occupied
    memory_mib: int
    gi_cap_minor: int  # /dev/nvidia-caps/nvidia-cap<minor> for the GI access capability
    ci_cap_minor: int  # ... and for the CI access capability

    @property
    def device_index(self) -> str:
        """NVIDIA's index form for a MIG device: '<gpu index>:<mig index>'."""
        return f"{self.parent_index}:{self.index}"

    @property
    def capability_paths(self) -> tuple[str, str]:
        """The GI's and the CI's access capability device nodes: a container needs both besides its GPU's."""
        return (f"/dev/nvidia-caps/nvidia-cap{self.gi_cap_minor}", f"/dev/nvidia-caps/nvidia-cap{self.ci_cap_minor}")


# PCI class codes of NVIDIA GPUs: a 3D controller is a compute GPU, a VGA controller drives displays.
PCI_CLASS_3D_CONTROLLER = 0x030200
PCI_CLASS_VGA_CONTROLLER = 0x030000


@record
class FabricInfo:
    """A GPU's place in a multi-node NVLink fabric, once the fabric manager has registered it."""

    cluster_uuid: str
    clique_id: int

    @property
    def clique(self) -> str:
        """`<cluster UUID>.<clique ID>`, the value of gpu-feature-discovery's gpu.clique label."""
        return f"{self.cluster_uuid}.{self.clique_id}"


@record
class Gpu:
    """One physical GPU as discovered on a node."""

    index: int
    uuid: str  # "GPU-<uuid>"
    product_name: str  # as NVML reports it, e.g. "NVIDIA H100 80GB HBM3"
    memory_mib: int
    compute_capability: ComputeCapability
    numa_node: int | None = None
    pci_bus_id: str = ""
    minor: int | None = None  # /dev/nvidia<minor>; defaults to the index
    mig_enabled: bool = False
    mig_instances: tuple[MigInstance, ...] = ()
    pci_class: int | None = None  # the 24-bit PCI class code; None when discovery could not read it
    fabric: FabricInfo | None = None  # None: not attached to an NVLink fabric (or not registered yet)

    @property
    def device_minor(self) -> int:
        return self.index if self.minor is None else self.minor

    @property
    def device_path(self) -> str:
        return f"/dev/nvidia{self.device_minor}"


@record
class Node:
    """A node: its GPUs and driver facts. Topology and health sources are attached by discovery."""

    name: str
    gpus: tuple[Gpu, ...]
    driver_version: str = "550.127.08"
    cuda_driver_version: str = "12.4"
    machine_type: str = "unknown"
    extra: dict[str, str] = field(default_factory=dict, compare=False, hash=False)

    def gpu_by_uuid(self, uuid: str) -> Gpu | None:
        for gpu in self.gpus:
            if gpu.uuid == uuid:
                return gpu
        return None

    def mig_by_uuid(self, uuid: str) -> MigInstance | None:
        for gpu in self.gpus:
            for mig in gpu.mig_instances:
                if mig.uuid == uuid:
                    return mig
        return None

    @property
    def product_names(self) -> tuple[str, ...]:
        """Distinct product names, in order of first appearance."""
        seen: dict[str, None] = {}
        for gpu in self.gpus:
            seen.setdefault(gpu.product_name, None)
        return tuple(seen)
