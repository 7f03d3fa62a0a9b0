"""The simulator's vocabulary: pods, jobs, nodes (built on gpuslice.gpu) and NVLink islands."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuslice.gpu import Gpu
from gpuslice.units import MILLI

# Where a job's GPUs may be (JobSpec.topology): anywhere; every pod on one node; and on one node inside
# one NVLink island of it (sim.extensions.constraints enforces them).
TOPOLOGY_CONSTRAINTS = ("any", "same-node", "nvlink")


class SimModelError(ValueError):
    """A pod, job or node that the simulator cannot represent; the message names it and the reason."""


@dataclass(frozen=True, slots=True)
class PodSpec:
    """What one pod asks for: `gpu_count` GPUs of `gpu_milli` each, CPU, memory, optionally a GPU model.

    Whole GPUs: gpu_milli = 1000 and gpu_count >= 1. A fraction of one GPU: gpu_count = 1 and
    0 < gpu_milli < 1000 (a pod never gets fractions of several GPUs). CPU-only: both 0.
    `gpu_model` restricts the pod to nodes whose GPU product name contains it (case-insensitive).
    """

    gpu_count: int = 0
    gpu_milli: int = 0
    cpu_milli: int = 1000
    memory_mib: int = 1024
    gpu_model: str | None = None

    def __post_init__(self) -> None:
        if self.gpu_count < 0 or self.cpu_milli < 0 or self.memory_mib < 0:
            raise SimModelError(f"pod {self}: counts must not be negative")
        if self.gpu_count == 0 and self.gpu_milli != 0:
            raise SimModelError(f"pod {self}: gpu_milli without gpu_count")
        if self.gpu_count > 0 and not 0 < self.gpu_milli <= MILLI:
            raise SimModelError(f"pod {self}: gpu_milli must be in 1..{MILLI}")
        if self.gpu_count > 1 and self.gpu_milli != MILLI:
            raise SimModelError(f"pod {self}: only a single GPU can be shared (fraction of {self.gpu_count} GPUs)")

    @classmethod
    def of(cls, gpu: float, cpu_milli: int = 1000, memory_mib: int = 1024, gpu_model: str | None = None) -> PodSpec:
        """A pod from a GPU amount as people write it: 0.25, 0.5, 1, 8 (fractions only below one GPU)."""
        if gpu < 0:
            raise SimModelError(f"gpu must not be negative, got {gpu}")
        if gpu == 0:
            return cls(0, 0, cpu_milli, memory_mib, gpu_model)
        if gpu < 1:
            return cls(1, round(gpu * MILLI), cpu_milli, memory_mib, gpu_model)
        if gpu != int(gpu):
            raise SimModelError(f"gpu {gpu}: above one GPU only whole numbers are allowed")
        return cls(int(gpu), MILLI, cpu_milli, memory_mib, gpu_model)

    @property
    def gpus(self) -> float:
        """GPU request in GPUs (0.5 for half a GPU)."""
        return self.gpu_count * self.gpu_milli / MILLI

    @property
    def fractional(self) -> bool:
        return 0 < self.gpu_milli < MILLI


@dataclass(frozen=True, slots=True)
class JobSpec:
    """A job: its pods, when it arrives, how long it runs, and who asks.

    `gang`: the pods must all run together (distributed training); the job starts when its last pod is
    bound and pods that are bound earlier hold their GPUs idle. A non-gang job's pods run independently.
    `topology`: one of TOPOLOGY_CONSTRAINTS; a constrained job of several pods is placed as one unit.
    """

    job_id: str
    submit: float
    duration: float
    pods: tuple[PodSpec, ...]
    priority: int = 0
    tenant: str = "default"
    gang: bool = False
    topology: str = "any"

    def __post_init__(self) -> None:
        if not self.pods:
            raise SimModelError(f"job {self.job_id!r}: has no pods")
        if self.topology not in TOPOLOGY_CONSTRAINTS:
            raise SimModelError(
                f"job {self.job_id!r}: topology must be one of {', '.join(TOPOLOGY_CONSTRAINTS)}, got {self.topology!r}"
            )
        if not self.duration > 0:
            raise SimModelError(f"job {self.job_id!r}: duration must be positive, got {self.duration}")
        if not self.submit >= 0:
            raise SimModelError(f"job {self.job_id!r}: submit time must be >= 0, got {self.submit}")

    @property
    def gpus(self) -> float:
        """Total GPU request of all pods."""
        return sum(pod.gpus for pod in self.pods)


@dataclass(frozen=True)
class SimNode:
    """A cluster node: the project's Gpu records plus the CPU, memory and NVLink island the simulator needs."""

    name: str
    gpus: tuple[Gpu, ...]
    cpu_milli: int
    memory_mib: int
    island: str

    def __post_init__(self) -> None:
        products = {gpu.product_name for gpu in self.gpus}
        if len(products) > 1:
            raise SimModelError(f"node {self.name!r} mixes GPU models {sorted(products)}; use one model per node")

    @property
    def product_name(self) -> str:
        return self.gpus[0].product_name if self.gpus else ""


@dataclass(frozen=True)
class ClusterSpec:
    """The nodes of a simulated cluster, in a fixed order (the order first-fit scans)."""

    nodes: tuple[SimNode, ...]
    description: str = ""
    islands: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        if not self.nodes:
            raise SimModelError("a cluster needs at least one node")
        names = [node.name for node in self.nodes]
        if len(set(names)) != len(names):
            raise SimModelError("node names must be unique in a cluster")
        object.__setattr__(self, "islands", tuple(dict.fromkeys(node.island for node in self.nodes)))

    @property
    def total_gpus(self) -> int:
        return sum(len(node.gpus) for node in self.nodes)
