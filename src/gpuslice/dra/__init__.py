"""DRA: the kubelet's Dynamic Resource Allocation front end over the same node model as the device plugin."""

from gpuslice.dra.api import ApiError, InMemoryResourceApi, ResourceApi
from gpuslice.dra.app import DraApp
from gpuslice.dra.contract import ClaimDriver
from gpuslice.dra.names import DEFAULT_DRIVER, DRA_SUPPORTED_VERSIONS, NVIDIA_DRIVER
from gpuslice.dra.settings import DraSettings
from gpuslice.dra.setup import DraSetup, DraSetupError, prepare_setup
from gpuslice.dra.slices import API_VERSIONS, PoolSpec, build_slices

__all__ = [
    "API_VERSIONS",
    "DEFAULT_DRIVER",
    "DRA_SUPPORTED_VERSIONS",
    "NVIDIA_DRIVER",
    "ApiError",
    "ClaimDriver",
    "DraApp",
    "DraSettings",
    "DraSetup",
    "DraSetupError",
    "InMemoryResourceApi",
    "PoolSpec",
    "ResourceApi",
    "build_slices",
    "prepare_setup",
]
