"""NVIDIA's MIG strategies: which physical devices each resource name gets before any sharing."""

from __future__ import annotations

import re

from gpuslice.config import RESOURCE_PREFIX
from gpuslice.gpu import Gpu, MigInstance, Node
from gpuslice.records import record
from gpuslice.sharing.model import DeviceKind, SharingError

GPU_RESOURCE = f"{RESOURCE_PREFIX}gpu"
_COMPUTE_SLICED = re.compile(r"\d+c\.")  # <C>c.<G>g.<GB>gb: a compute instance smaller than its GPU instance


def mig_resource_name(profile: str) -> str:
    """NVIDIA's mixed-strategy name: nvidia.com/mig-<profile with every '+' replaced by '.'>."""
    return f"{RESOURCE_PREFIX}mig-{profile.replace('+', '.')}"


@record
class BaseResource:
    """A resource before sharing: its name and its physical devices, in GPU then MIG index order."""

    name: str
    devices: tuple[tuple[Gpu, MigInstance | None], ...]
    profile: str | None = None  # the MIG profile, when every device is a MIG device of one profile

    @property
    def kind(self) -> DeviceKind:
        return "mig" if any(mig is not None for _, mig in self.devices) else "gpu"


def base_resources(node: Node, strategy: str, warnings: list[str]) -> list[BaseResource]:
    """The resources of `flags.migStrategy` (none | single | mixed); empty ones are kept, callers drop them."""
    whole = [gpu for gpu in node.gpus if strategy == "none" or not gpu.mig_enabled]
    if strategy == "none":
        return [BaseResource(GPU_RESOURCE, tuple((gpu, None) for gpu in whole))]
    mig_gpus = [gpu for gpu in node.gpus if gpu.mig_enabled]
    if strategy == "single":
        return [_single(whole, mig_gpus)]
    if strategy != "mixed":
        raise SharingError(f"flags.migStrategy: unknown MIG strategy: {strategy}")
    bases = [BaseResource(GPU_RESOURCE, tuple((gpu, None) for gpu in whole))]
    by_profile: dict[str, list[tuple[Gpu, MigInstance | None]]] = {}
    for gpu in mig_gpus:
        if not gpu.mig_instances:
            warnings.append(f"GPU {gpu.index} ({gpu.uuid}) has MIG enabled but no MIG devices; it advertises nothing")
        for mig in gpu.mig_instances:
            if _COMPUTE_SLICED.match(mig.profile):
                # NVIDIA's mixed patterns cover only profiles whose compute slices equal their GPU slices.
                raise SharingError(f"MIG profile '{mig.profile}' does not match any resource patterns")
            by_profile.setdefault(mig.profile, []).append((gpu, mig))
    for profile in sorted(by_profile):
        bases.append(BaseResource(mig_resource_name(profile), tuple(by_profile[profile]), profile))
    return bases


def _single(whole: list[Gpu], mig_gpus: list[Gpu]) -> BaseResource:
    if not mig_gpus:
        return BaseResource(GPU_RESOURCE, tuple((gpu, None) for gpu in whole))
    if whole:
        raise SharingError(
            "flags.migStrategy=single: all devices on the node must be configured with the same migEnabled "
            f"value (GPU {whole[0].index} has MIG disabled, GPU {mig_gpus[0].index} has it enabled)"
        )
    for gpu in mig_gpus:
        if not gpu.mig_instances:
            raise SharingError(f"flags.migStrategy=single: device {gpu.index} has no MIG devices configured")
    profiles = sorted({mig.profile for gpu in mig_gpus for mig in gpu.mig_instances})
    if len(profiles) > 1:
        raise SharingError(
            f"flags.migStrategy=single: more than one MIG device type present on node ({', '.join(profiles)})"
        )
    devices = tuple((gpu, mig) for gpu in mig_gpus for mig in gpu.mig_instances)
    return BaseResource(GPU_RESOURCE, devices, profiles[0])
