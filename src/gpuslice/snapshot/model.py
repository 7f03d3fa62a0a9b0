"""A snapshot's cluster: GPU nodes and pods as the what-if sees them, and what was guessed on the way."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SnapNode:
    """One node. `gpus` counts physical GPUs; `replicas` is what one GPU is advertised as under
    time-slicing or MPS (1 otherwise); `mig` is the allocatable MIG devices by profile."""

    name: str
    gpus: int
    gpu_model: str
    gpu_memory_mib: int
    cpu_milli: int
    memory_mib: int
    sharing: str  # none | time-slicing | mps | mig-single | mig-mixed | dra
    replicas: int = 1
    mig: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class SnapPod:
    """One pod that holds or waits for resources. `gpu_milli` is per GPU (1000 = a whole GPU), as in openb;
    `node` is "" for a pod not yet scheduled; `spec` is the GPU models it may use ("" = any)."""

    namespace: str
    name: str
    node: str
    phase: str
    created: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int
    spec: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def gpu_request_milli(self) -> int:
        return self.num_gpu * self.gpu_milli


@dataclass(frozen=True)
class Snapshot:
    """What the cluster read gave: nodes by name, pods (bound first, by creation, then pending), the DRA
    state ("served" or "not served"), what was guessed, and the objects skipped as malformed."""

    nodes: tuple[SnapNode, ...]
    pods: tuple[SnapPod, ...]
    dra: str
    guesses: tuple[str, ...]
    skipped: tuple[str, ...]

    @property
    def gpus_total(self) -> int:
        return sum(node.gpus for node in self.nodes)

    @property
    def bound(self) -> tuple[SnapPod, ...]:
        return tuple(pod for pod in self.pods if pod.node)

    @property
    def pending(self) -> tuple[SnapPod, ...]:
        return tuple(pod for pod in self.pods if not pod.node)
