"""A seeded synthetic trace: Poisson arrivals sized to an offered load, a job-size mix, log-uniform durations."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace

import numpy as np

from gpuslice.sim.core.clusters import parse_cluster
from gpuslice.sim.core.model import JobSpec, PodSpec
from gpuslice.sim.traces.trace import Trace, TraceError
from gpuslice.units import MILLI

CPU_MILLI_PER_GPU = 8_000
MEMORY_MIB_PER_GPU = 64 * 1024
SMALL_POD_CPU_MILLI = 2_000  # a fractional pod still needs a couple of cores
SMALL_POD_MEMORY_MIB = 16 * 1024


@dataclass(frozen=True)
class JobClass:
    """One kind of job in the mix: `pods` pods of `gpu` GPUs each, drawn with probability `weight`."""

    weight: float
    pods: int
    gpu: float
    gang: bool = False

    @property
    def gpus(self) -> float:
        return self.pods * self.gpu

    def pod(self) -> PodSpec:
        if self.gpu < 1:
            return PodSpec.of(self.gpu, SMALL_POD_CPU_MILLI, SMALL_POD_MEMORY_MIB)
        return PodSpec.of(self.gpu, int(CPU_MILLI_PER_GPU * self.gpu), int(MEMORY_MIB_PER_GPU * self.gpu))


# Notebooks and inference on GPU shares, many single-GPU jobs, some whole-node training and a few
# multi-node gangs: the shape of most published GPU-cluster job-size histograms (weights sum to 1).
DEFAULT_MIX: tuple[JobClass, ...] = (
    JobClass(0.10, 1, 0.25),
    JobClass(0.10, 1, 0.5),
    JobClass(0.35, 1, 1),
    JobClass(0.15, 1, 2),
    JobClass(0.12, 1, 4),
    JobClass(0.12, 1, 8),
    JobClass(0.04, 2, 8, gang=True),
    JobClass(0.02, 4, 8, gang=True),
)


@dataclass(frozen=True)
class SyntheticParams:
    """Parameters of the generator; `synthetic:jobs=5000,load=0.8,nodes=128` on the command line."""

    jobs: int = 5000
    load: float = 0.9  # offered load: arriving GPU-seconds per second / cluster GPUs
    nodes: int = 64
    preset: str = "dgx-h100"
    island: int = 8  # nodes per NVLink island
    duration_min: float = 60.0
    duration_max: float = 8 * 3600.0
    tenants: int = 4
    high_priority: float = 0.1  # share of jobs with priority 1
    mix: tuple[JobClass, ...] = DEFAULT_MIX

    @classmethod
    def from_params(cls, params: Mapping[str, str]) -> SyntheticParams:
        known = {f.name: f.type for f in fields(cls) if f.name != "mix"}
        values: dict[str, object] = {}
        for key, text in params.items():
            if key not in known:
                raise TraceError(f"synthetic: unknown parameter {key!r}; known: {', '.join(known)}")
            kind = str(known[key])
            try:
                values[key] = int(text) if kind == "int" else float(text) if kind == "float" else text
            except ValueError:
                raise TraceError(f"synthetic: {key} must be a number, got {text!r}") from None
        result = replace(cls(), **values)  # type: ignore[arg-type]
        result.validate()
        return result

    def validate(self) -> None:
        if self.jobs < 1 or self.nodes < 1 or self.island < 1 or self.tenants < 1:
            raise TraceError("synthetic: jobs, nodes, island and tenants must be at least 1")
        if not self.load > 0:
            raise TraceError(f"synthetic: load must be positive, got {self.load}")
        if not 0 < self.duration_min < self.duration_max:
            raise TraceError("synthetic: need 0 < duration_min < duration_max")
        if abs(sum(c.weight for c in self.mix) - 1) > 1e-9:
            raise TraceError("synthetic: the job-class weights must sum to 1")

    @property
    def cluster_text(self) -> str:
        return f"{self.nodes}x{self.preset};island={self.island}"

    # -- moments used to size arrivals and, in the tests, to predict utilization ---------------
    def mean_gpus(self) -> float:
        return sum(c.weight * c.gpus for c in self.mix)

    def mean_gpus_squared(self) -> float:
        return sum(c.weight * c.gpus**2 for c in self.mix)

    def mean_duration(self) -> float:
        """E[d] of the log-uniform law on [a, b]: (b - a) / ln(b / a)."""
        a, b = self.duration_min, self.duration_max
        return (b - a) / math.log(b / a)

    def mean_duration_squared(self) -> float:
        """E[d^2] of the log-uniform law on [a, b]: (b^2 - a^2) / (2 ln(b / a))."""
        a, b = self.duration_min, self.duration_max
        return (b * b - a * a) / (2 * math.log(b / a))

    def arrival_rate(self, cluster_gpus: int) -> float:
        """Jobs per second that offer `load`: load * GPUs / (E[gpus] * E[duration])."""
        return self.load * cluster_gpus / (self.mean_gpus() * self.mean_duration())


def generate(params: SyntheticParams, seed: int) -> Trace:
    """The trace for `params`, identical for identical (params, seed)."""
    params.validate()
    cluster = parse_cluster(params.cluster_text)
    rng = np.random.default_rng(seed)
    count = params.jobs
    rate = params.arrival_rate(cluster.total_gpus)
    submits = np.cumsum(rng.exponential(1.0 / rate, size=count))
    weights = np.array([c.weight for c in params.mix])
    classes = rng.choice(len(params.mix), size=count, p=weights / weights.sum())
    low, high = math.log(params.duration_min), math.log(params.duration_max)
    durations = np.exp(rng.uniform(low, high, size=count))
    tenants = rng.integers(0, params.tenants, size=count)
    priorities = (rng.random(size=count) < params.high_priority).astype(int)
    pod_of = [c.pod() for c in params.mix]
    biggest = max(len(node.gpus) for node in cluster.nodes) * MILLI
    for job_class, pod in zip(params.mix, pod_of, strict=True):
        if pod.gpu_count * pod.gpu_milli > biggest:
            raise TraceError(f"synthetic: a {job_class.gpu}-GPU pod does not fit a {params.preset} node")
    jobs = tuple(
        JobSpec(
            job_id=f"job-{index:06d}",
            submit=round(float(submits[index]), 3),
            duration=round(float(durations[index]), 3),
            pods=(pod_of[klass],) * params.mix[klass].pods,
            priority=int(priorities[index]),
            tenant=f"tenant-{tenants[index]}",
            gang=params.mix[klass].gang,
        )
        for index, klass in enumerate(classes.tolist())
    )
    return Trace(
        name="synthetic",
        cluster=cluster,
        jobs=jobs,
        description=(
            f"{count} jobs, Poisson arrivals at offered load {params.load:g} on {params.cluster_text}, "
            f"log-uniform durations {params.duration_min:g}-{params.duration_max:g} s, seed {seed}"
        ),
        cluster_text=params.cluster_text,
    )
