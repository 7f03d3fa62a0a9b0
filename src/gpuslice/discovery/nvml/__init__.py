"""NVML (nvidia-ml-py): discovery, Xid health events, the recovery probe and dynamic MIG control.

Importing this package does not load pynvml: the binding is imported when an NvmlBackend is built
without a library of its own (tests pass the in-repo fake, nvml.fake).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuslice.exports import lazy_exports

if TYPE_CHECKING:
    from gpuslice.discovery.capabilities import NVML_PROBE_INTERVAL_S as NVML_PROBE_INTERVAL_S
    from gpuslice.discovery.capabilities import NVML_QUIET_S as NVML_QUIET_S
    from gpuslice.discovery.capabilities import MigControlError as MigControlError
    from gpuslice.discovery.nvml.backend import NvmlBackend as NvmlBackend
    from gpuslice.discovery.nvml.backend import PairFacts as PairFacts
    from gpuslice.discovery.nvml.backend import cuda_version_text as cuda_version_text
    from gpuslice.discovery.nvml.backend import mig_profile_name as mig_profile_name
    from gpuslice.discovery.nvml.health import NvmlHealthSource as NvmlHealthSource
    from gpuslice.discovery.nvml.health import NvmlProbe as NvmlProbe
    from gpuslice.discovery.nvml.library import NvmlDiscoveryError as NvmlDiscoveryError
    from gpuslice.discovery.nvml.library import NvmlLibrary as NvmlLibrary
    from gpuslice.discovery.nvml.library import NvmlSession as NvmlSession
    from gpuslice.discovery.nvml.library import NvmlUnavailable as NvmlUnavailable
    from gpuslice.discovery.nvml.mig import NvmlMigControl as NvmlMigControl

__all__, __getattr__ = lazy_exports(__name__)
