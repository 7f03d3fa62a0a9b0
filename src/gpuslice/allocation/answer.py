"""The Allocate answer as plain data: container edits (env, mounts, device nodes, annotations, CDI)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import field
from typing import Any

from gpuslice.records import record
from gpuslice.sharing import Isolation


@record
class DeviceNode:
    """A device node the container may use (the kubelet's DeviceSpec)."""

    container_path: str
    host_path: str
    permissions: str = "rw"


@record
class Mount:
    """A host path mounted into the container."""

    container_path: str
    host_path: str
    read_only: bool = False


@record
class ContainerEdits:
    """What one step of the Allocate pipeline adds to a container.

    Steps are merged in order: a later step's env and annotations override earlier keys (NVIDIA's
    volume-mounts step overwrites NVIDIA_VISIBLE_DEVICES); mounts and device nodes are keyed by
    container path and the first one wins, as in the kubelet; CDI names are de-duplicated.
    """

    envs: Mapping[str, str] = field(default_factory=dict)
    mounts: tuple[Mount, ...] = ()
    device_nodes: tuple[DeviceNode, ...] = ()
    annotations: Mapping[str, str] = field(default_factory=dict)
    cdi_devices: tuple[str, ...] = ()

    def merged(self, later: ContainerEdits) -> ContainerEdits:
        return combine((self, later))


def combine(parts: Iterable[ContainerEdits]) -> ContainerEdits:
    """Merge the edits of several steps, in order, by ContainerEdits' rules (one pass: Allocate is hot)."""
    envs: dict[str, str] = {}
    mounts: dict[str, Mount] = {}
    nodes: dict[str, DeviceNode] = {}
    annotations: dict[str, str] = {}
    cdi: dict[str, None] = {}
    for part in parts:
        envs.update(part.envs)
        for mount in part.mounts:
            mounts.setdefault(mount.container_path, mount)
        for node in part.device_nodes:
            nodes.setdefault(node.container_path, node)
        annotations.update(part.annotations)
        cdi.update(dict.fromkeys(part.cdi_devices))
    return ContainerEdits(envs, tuple(mounts.values()), tuple(nodes.values()), annotations, tuple(cdi))


@record
class ContainerAllocation:
    """The answer for one container: which devices, what the container gets, and how isolated it is."""

    resource: str
    device_ids: tuple[str, ...]  # as requested
    physical_ids: tuple[str, ...]  # de-duplicated physical devices, first-seen order
    edits: ContainerEdits
    isolation: Isolation

    @property
    def envs(self) -> Mapping[str, str]:
        return self.edits.envs

    @property
    def device_nodes(self) -> tuple[DeviceNode, ...]:
        return self.edits.device_nodes

    @property
    def mounts(self) -> tuple[Mount, ...]:
        return self.edits.mounts

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form (for the demo's --json and for logs)."""
        return {
            "resource": self.resource,
            "device_ids": list(self.device_ids),
            "physical_ids": list(self.physical_ids),
            "envs": dict(self.edits.envs),
            "mounts": [vars(m) for m in self.edits.mounts],
            "device_nodes": [vars(d) for d in self.edits.device_nodes],
            "annotations": dict(self.edits.annotations),
            "cdi_devices": list(self.edits.cdi_devices),
            "isolation": {
                "kind": self.isolation.value,
                "strength": self.isolation.strength,
                "why": self.isolation.why,
            },
        }


@record
class AllocationAnswer:
    """One ContainerAllocation per container request, in request order."""

    containers: tuple[ContainerAllocation, ...]
