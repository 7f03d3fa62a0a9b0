"""DRA: the kubelet's Dynamic Resource Allocation front end over the same node model as the device plugin."""

from gpuslice.dra.api import ApiError, InMemoryResourceApi, ResourceApi
from gpuslice.dra.app import DraApp, DraSettings
from gpuslice.dra.names import DEFAULT_DRIVER, NVIDIA_DRIVER, SUPPORTED_VERSIONS
from gpuslice.dra.setup import DraSetup, SetupError, prepare_setup
from gpuslice.dra.slices import API_VERSIONS, PoolSpec, build_slices

__all__ = [
    "API_VERSIONS",
    "DEFAULT_DRIVER",
    "NVIDIA_DRIVER",
    "SUPPORTED_VERSIONS",
    "ApiError",
    "DraApp",
    "DraSettings",
    "DraSetup",
    "InMemoryResourceApi",
    "PoolSpec",
    "ResourceApi",
    "SetupError",
    "build_slices",
    "prepare_setup",
]
