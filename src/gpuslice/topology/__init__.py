"""GPU topology: pair links (NVLink, NVSwitch, PCIe levels), presets, pair scoring and the preferred-GPU search."""

from gpuslice.topology.model import (
    NVLINK_POINTS,
    GpuRef,
    PairLink,
    PcieLevel,
    Topology,
    UnknownGpuError,
    uniform_links,
)
from gpuslice.topology.partition import (
    MAX_PARTITION_ITEMS,
    Partition,
    best_partition,
    clear_search_cache,
)
from gpuslice.topology.preferred import (
    preferred_whole_gpus,
)
from gpuslice.topology.presets import (
    PRESET_NAMES,
    UnknownPreset,
    preset_gpu_count,
    preset_topology,
)
from gpuslice.topology.spec import (
    PCIE_LEVEL_NAMES,
    TopologySpecError,
    topology_from_spec,
)

__all__ = [
    "MAX_PARTITION_ITEMS",
    "NVLINK_POINTS",
    "PCIE_LEVEL_NAMES",
    "PRESET_NAMES",
    "GpuRef",
    "PairLink",
    "Partition",
    "PcieLevel",
    "Topology",
    "TopologySpecError",
    "UnknownGpuError",
    "UnknownPreset",
    "best_partition",
    "clear_search_cache",
    "preferred_whole_gpus",
    "preset_gpu_count",
    "preset_topology",
    "topology_from_spec",
    "uniform_links",
]
