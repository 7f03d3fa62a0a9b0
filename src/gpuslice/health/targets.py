"""Which physical devices (GPU or MIG UUIDs) an Xid event or a recovery probe is about."""

from __future__ import annotations

from gpuslice.discovery.xid import XidEvent
from gpuslice.gpu import Gpu, MigInstance, Node


def find_gpu(node: Node, uuid: str) -> tuple[Gpu, MigInstance | None] | None:
    """The GPU (and MIG instance) a GPU or MIG UUID names, or None when the node has no such device."""
    for gpu in node.gpus:
        if gpu.uuid == uuid:
            return gpu, None
        for mig in gpu.mig_instances:
            if mig.uuid == uuid:
                return gpu, mig
    return None


def event_targets(event: XidEvent, node: Node) -> tuple[str, ...]:
    """The physical IDs to mark unhealthy; empty when the event names a device this node does not have.

    Marks go on physical devices, never on advertised IDs: marking a GPU UUID takes every replica and
    every MIG device on it along (sharing.HealthStore), where NVIDIA marks only one replica.
    - no UUID (NVML could not tell which device): every GPU of the node;
    - a MIG-scoped event (GI/CI set, as NVML reports on MIG GPUs): the MIG device with that GI/CI, or the
      whole GPU when none matches (a fault we cannot place must not leave the GPU advertised as Healthy);
    - a MIG UUID (the events file may name one): that MIG device;
    - a GPU UUID: the GPU.
    """
    if event.uuid is None:
        return tuple(gpu.uuid for gpu in node.gpus)
    found = find_gpu(node, event.uuid)
    if found is None:
        return ()
    gpu, mig = found
    if mig is not None:
        return (mig.uuid,)
    if event.mig_scoped:
        for instance in gpu.mig_instances:
            if (instance.gi, instance.ci) == (event.gi, event.ci):
                return (instance.uuid,)
    return (gpu.uuid,)


def probe_targets(uuid: str, node: Node) -> tuple[str, ...]:
    """What a passed probe clears: a GPU UUID clears the GPU and its MIG devices, a MIG UUID only itself."""
    found = find_gpu(node, uuid)
    if found is None:
        return ()
    gpu, mig = found
    if mig is not None:
        return (mig.uuid,)
    return (gpu.uuid, *(instance.uuid for instance in gpu.mig_instances))
