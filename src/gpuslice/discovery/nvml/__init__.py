"""NVML (nvidia-ml-py): discovery, Xid health events, the recovery probe and dynamic MIG control.

Importing this package does not load pynvml: the binding is imported when an NvmlBackend is built
without a library of its own (tests pass the in-repo fake, nvml.fake).
"""

from gpuslice.discovery.capabilities import MigControlError
from gpuslice.discovery.nvml.backend import NvmlBackend, PairFacts, cuda_version_text, mig_profile_name
from gpuslice.discovery.nvml.health import NVML_PROBE_INTERVAL_S, NVML_QUIET_S, NvmlHealthSource, NvmlProbe
from gpuslice.discovery.nvml.library import NvmlDiscoveryError, NvmlLibrary, NvmlSession, NvmlUnavailable
from gpuslice.discovery.nvml.mig import NvmlMigControl

__all__ = [
    "NVML_PROBE_INTERVAL_S",
    "NVML_QUIET_S",
    "MigControlError",
    "NvmlBackend",
    "NvmlDiscoveryError",
    "NvmlHealthSource",
    "NvmlLibrary",
    "NvmlMigControl",
    "NvmlProbe",
    "NvmlSession",
    "NvmlUnavailable",
    "PairFacts",
    "cuda_version_text",
    "mig_profile_name",
]
