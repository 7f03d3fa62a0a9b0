"""A MigControl that validates placements against the MIG catalogue and records calls: the fake of NVML's."""

from __future__ import annotations

import uuid as uuidlib
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from gpuslice.discovery.capabilities import MigControlError
from gpuslice.discovery.mig_minors import STANDARD_MIG_MINORS
from gpuslice.gpu import InvalidMigLayout, MigCatalogue, MigInstance, Node, catalogue_for, free_placements, name_uuid

MigCall = tuple[str, int, Any, int]  # (create | destroy, GPU index, profile or GI, start or CI)


@runtime_checkable
class RecordsMigCalls(Protocol):
    """A MIG control that keeps the device calls it was asked to make (the fake does; NVML's does not)."""

    calls: list[MigCall]


_NAMESPACE = uuidlib.UUID("9d3f4a52-61c4-4f8e-8a0b-6d6967637472")  # deterministic UUIDs of recorded MIG devices


class RecordingMigControl:
    """A MigControl for tests of dynamic MIG above discovery: validates placements, records calls."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.calls: list[MigCall] = []
        self.instances: dict[int, dict[tuple[int, int], MigInstance]] = {
            g.index: {(m.gi, m.ci): m for m in g.mig_instances} for g in node.gpus
        }

    def _catalogue(self, gpu_index: int) -> MigCatalogue:
        gpu = self.node.gpus[gpu_index]
        catalogue = catalogue_for(gpu.product_name, gpu.memory_mib)
        if catalogue is None or not gpu.mig_enabled:
            raise MigControlError(f"GPU {gpu_index} ({gpu.product_name}): MIG mode is not enabled on this GPU")
        return catalogue

    def create(self, gpu_index: int, profile: str, start: int) -> MigInstance:
        self.calls.append(("create", gpu_index, profile, start))
        catalogue = self._catalogue(gpu_index)
        try:
            wanted = catalogue.profile(profile)
        except InvalidMigLayout as exc:
            raise MigControlError(f"GPU {gpu_index}: {exc}") from exc
        existing = self.instances[gpu_index]
        occupied = [(m.placement_start, m.placement_size) for m in existing.values()]
        if start not in free_placements(catalogue, wanted, occupied):
            raise MigControlError(f"GPU {gpu_index}: {profile} does not fit at slice {start}")
        gpu = self.node.gpus[gpu_index]
        gi = min(set(range(1, 15)) - {key[0] for key in existing})
        instance = MigInstance(
            profile=wanted.name,
            uuid=f"MIG-{name_uuid(_NAMESPACE, f'{gpu.uuid}/{gi}/0')}",
            parent_uuid=gpu.uuid,
            parent_index=gpu_index,
            index=len(existing),
            gi=gi,
            ci=0,
            placement_start=start,
            placement_size=wanted.memory_slices,
            memory_mib=gpu.memory_mib * wanted.memory_slices // catalogue.memory_slices,
            gi_cap_minor=STANDARD_MIG_MINORS.gi_minor(gpu.device_minor, gi),
            ci_cap_minor=STANDARD_MIG_MINORS.ci_minor(gpu.device_minor, gi, 0),
        )
        existing[(gi, 0)] = instance
        return instance

    def destroy(self, gpu_index: int, gi: int, ci: int) -> None:
        self.calls.append(("destroy", gpu_index, gi, ci))
        if self.instances.get(gpu_index, {}).pop((gi, ci), None) is None:
            raise MigControlError(f"GPU {gpu_index}: no MIG device GI {gi}/CI {ci}")

    def live_instances(self, gpu_indices: Sequence[int]) -> list[MigInstance]:
        """The instances this control holds on these GPUs (those of the node spec, then those it created)."""
        return [m for index in gpu_indices for m in self.instances.get(index, {}).values()]
