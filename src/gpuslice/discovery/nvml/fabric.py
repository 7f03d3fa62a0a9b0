"""NVML's GPU fabric info (multi-node NVLink) as the model's FabricInfo: cluster UUID and clique ID."""

from __future__ import annotations

import uuid
from typing import Any

from gpuslice.gpu import FabricInfo

# nvmlGpuFabricInfo_t.state: the fabric manager has finished registering the GPU.
NVML_GPU_FABRIC_STATE_COMPLETED = 3
NVML_SUCCESS = 0
CLUSTER_UUID_BYTES = 16


def fabric_info(info: Any) -> FabricInfo | None:
    """The GPU's fabric membership from a filled nvmlGpuFabricInfo_t, or None when it is not (yet) registered;
    an all-zero cluster UUID means the GPU is not part of a cluster."""
    if int(info.state) != NVML_GPU_FABRIC_STATE_COMPLETED or int(info.status) != NVML_SUCCESS:
        return None
    data = bytes(info.clusterUuid)[:CLUSTER_UUID_BYTES]  # a uint8 array in NVML's struct
    if len(data) != CLUSTER_UUID_BYTES or data == bytes(CLUSTER_UUID_BYTES):
        return None
    return FabricInfo(str(uuid.UUID(bytes=data)), int(info.cliqueId))
