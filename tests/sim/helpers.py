"""Small builders shared by the simulator tests."""

from __future__ import annotations

from gpuslice.sim.core.clusters import parse_cluster
from gpuslice.sim.core.engine import Engine, SimConfig
from gpuslice.sim.core.metrics import SimResult
from gpuslice.sim.core.model import ClusterSpec, JobSpec, PodSpec
from gpuslice.sim.policies import make_policy


def pod(gpu: float, cpu_milli: int = 1000, memory_mib: int = 1024) -> PodSpec:
    return PodSpec.of(gpu, cpu_milli, memory_mib)


def job(
    job_id: str,
    gpu: float,
    submit: float = 0.0,
    duration: float = 10.0,
    pods: int = 1,
    gang: bool = False,
    priority: int = 0,
) -> JobSpec:
    return JobSpec(job_id, submit, duration, (pod(gpu),) * pods, priority=priority, gang=gang)


def cluster(text: str) -> ClusterSpec:
    return parse_cluster(text)


def simulate(spec: ClusterSpec, jobs: list[JobSpec], policy: str, penalty: float = 0.3) -> tuple[Engine, SimResult]:
    engine = Engine(spec, jobs, make_policy(policy), config=SimConfig(cross_island_penalty=penalty))
    return engine, engine.run()
