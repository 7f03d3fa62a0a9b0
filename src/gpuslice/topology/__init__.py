"""GPU topology: pair links (NVLink, NVSwitch, PCIe levels), presets, pair scoring and the preferred-GPU search."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuslice.exports import lazy_exports

if TYPE_CHECKING:
    from gpuslice.topology.model import NVLINK_POINTS as NVLINK_POINTS
    from gpuslice.topology.model import GpuRef as GpuRef
    from gpuslice.topology.model import PairLink as PairLink
    from gpuslice.topology.model import PcieLevel as PcieLevel
    from gpuslice.topology.model import Topology as Topology
    from gpuslice.topology.model import UnknownGpuError as UnknownGpuError
    from gpuslice.topology.model import uniform_links as uniform_links
    from gpuslice.topology.partition import MAX_PARTITION_ITEMS as MAX_PARTITION_ITEMS
    from gpuslice.topology.partition import Partition as Partition
    from gpuslice.topology.partition import best_partition as best_partition
    from gpuslice.topology.partition import clear_search_cache as clear_search_cache
    from gpuslice.topology.preferred import preferred_whole_gpus as preferred_whole_gpus
    from gpuslice.topology.presets import PRESET_NAMES as PRESET_NAMES
    from gpuslice.topology.presets import UnknownPreset as UnknownPreset
    from gpuslice.topology.presets import preset_gpu_count as preset_gpu_count
    from gpuslice.topology.presets import preset_topology as preset_topology
    from gpuslice.topology.spec import PCIE_LEVEL_NAMES as PCIE_LEVEL_NAMES
    from gpuslice.topology.spec import TopologySpecError as TopologySpecError
    from gpuslice.topology.spec import topology_from_spec as topology_from_spec

__all__, __getattr__ = lazy_exports(
    __name__,
    {
        "gpuslice.topology.model": (
            "NVLINK_POINTS",
            "GpuRef",
            "PairLink",
            "PcieLevel",
            "Topology",
            "UnknownGpuError",
            "uniform_links",
        ),
        "gpuslice.topology.partition": ("MAX_PARTITION_ITEMS", "Partition", "best_partition", "clear_search_cache"),
        "gpuslice.topology.preferred": ("preferred_whole_gpus",),
        "gpuslice.topology.presets": ("PRESET_NAMES", "UnknownPreset", "preset_gpu_count", "preset_topology"),
        "gpuslice.topology.spec": ("PCIE_LEVEL_NAMES", "TopologySpecError", "topology_from_spec"),
    },
)
