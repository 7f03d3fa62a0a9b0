"""What `gpuslice advise` needs to know about a GPU model: memory, compute capability, MIG catalogue."""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuslice.gpu import ComputeCapability, MigCatalogue, catalogue_for

# Memory as NVML reports it, for products whose figure the project already uses (the fake backend's presets).
# Any other product's memory is estimated from the "<N>GB" in its name unless the caller gives it.
_KNOWN_MEMORY_MIB: dict[str, int] = {
    "NVIDIA H100 80GB HBM3": 81559,
    "NVIDIA A100-SXM4-40GB": 40960,
}

# Marketing memory of products whose NVML name carries no "<N>GB" (used only as an estimate).
_NOMINAL_GB: tuple[tuple[str, int], ...] = (
    ("H200", 141),
    ("H100 NVL", 94),
    ("A30", 24),
    ("L40S", 48),
    ("L40", 48),
    ("L4", 24),
    ("T4", 16),
)

# Compute capability by product family (substring of the NVML product name), most specific first.
_CAPABILITY_BY_FAMILY: tuple[tuple[str, str], ...] = (
    ("GB200", "10.0"),
    ("B200", "10.0"),
    ("H200", "9.0"),
    ("H100", "9.0"),
    ("H800", "9.0"),
    ("GH200", "9.0"),
    ("L40", "8.9"),
    ("L4", "8.9"),
    ("A100", "8.0"),
    ("A800", "8.0"),
    ("A30", "8.0"),
    ("A10", "8.6"),
    ("T4", "7.5"),
    ("V100", "7.0"),
)

MPS_CLIENTS_VOLTA = 16
MPS_CLIENTS_TURING_AND_NEWER = 48


class UnknownGpuModel(ValueError):
    """A product whose memory cannot be known or estimated; the caller must give it."""


@dataclass(frozen=True)
class GpuFacts:
    """One GPU model as the advisor sees it."""

    product_name: str
    memory_mib: int
    memory_source: str  # "NVML figure", "given", or "estimated from ..."
    compute_capability: ComputeCapability | None
    mig_catalogue: MigCatalogue | None

    @property
    def memory_estimated(self) -> bool:
        return self.memory_source.startswith("estimated")

    @property
    def memory_gib(self) -> float:
        return self.memory_mib / 1024

    @property
    def mps_max_clients(self) -> int:
        """NVIDIA's per-GPU MPS client limit: 48 from compute capability 7.5, else 16 (unknown: the safe 16)."""
        if self.compute_capability is not None and self.compute_capability >= ComputeCapability(7, 5):
            return MPS_CLIENTS_TURING_AND_NEWER
        return MPS_CLIENTS_VOLTA


def resolve_gpu(product_name: str, memory_mib: int | None = None, compute_capability: str | None = None) -> GpuFacts:
    """Facts for a product name as NVML reports it (e.g. "NVIDIA H100 80GB HBM3"); given values win."""
    name = " ".join(product_name.split())
    if not name:
        raise UnknownGpuModel("the GPU model is empty; give the product name as nvidia-smi prints it")
    if memory_mib is not None:
        if memory_mib <= 0:
            raise UnknownGpuModel(f"GPU memory must be a positive number of MiB, got {memory_mib}")
        memory, source = memory_mib, "given"
    else:
        memory, source = _memory_of(name)
    capability = ComputeCapability.parse(compute_capability) if compute_capability else _capability_of(name)
    catalogue = catalogue_for(name, memory) if capability is None or capability.mig_capable else None
    return GpuFacts(name, memory, source, capability, catalogue)


def _memory_of(name: str) -> tuple[int, str]:
    if name in _KNOWN_MEMORY_MIB:
        return _KNOWN_MEMORY_MIB[name], "NVML figure"
    match = re.search(r"(\d+)\s*GB", name, flags=re.IGNORECASE)
    if match:
        gb = int(match.group(1))
        return gb * 1024, f"estimated from '{match.group(0)}' in the name"
    upper = name.upper()
    for family, gb in _NOMINAL_GB:
        if family in upper:
            return gb * 1024, f"estimated from the {family}'s nominal {gb} GB"
    raise UnknownGpuModel(
        f"cannot tell the memory of GPU model {name!r}: give --gpu-memory-mib (nvidia-smi --query-gpu=memory.total)"
    )


def _capability_of(name: str) -> ComputeCapability | None:
    upper = name.upper()
    for family, capability in _CAPABILITY_BY_FAMILY:
        if family in upper:
            return ComputeCapability.parse(capability)
    return None
