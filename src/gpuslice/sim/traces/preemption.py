"""The `preemption` trace: long low-priority training that checkpoints, and urgent high-priority jobs that cannot wait.

At t = 0 a backlog of low-priority training (4 and 8 GPUs, 2-8 h) fills the cluster, and more keeps
arriving. High-priority jobs (1-8 GPUs, 15-60 min) arrive all day at a fraction of the cluster. Without
preemption they queue behind hours of training; with it, training is evicted and pays for its
checkpoints. Each training job checkpoints every `interval` seconds of progress (a fixed value, or, with
interval=0, one drawn per job from 15, 30 and 60 min), each save takes `save` s and a restart `restore` s.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from gpuslice.sim.core.clusters import parse_cluster
from gpuslice.sim.core.model import JobSpec, PodSpec
from gpuslice.sim.extensions.checkpoint import NEVER, Checkpointing
from gpuslice.sim.traces.ext_common import log_uniform, log_uniform_mean, poisson_times, read_params
from gpuslice.sim.traces.trace import CheckpointCosts, Trace, TraceError, TracePhysics

HIGH, LOW = 100, 0
PER_JOB_INTERVALS = (900.0, 1800.0, 3600.0)
PREEMPTION_DEFAULTS: dict[str, int | float | str] = {
    "nodes": 8,
    "hours": 24.0,
    "high_load": 0.25,  # GPUs the urgent jobs ask for on average, as a share of the cluster
    "low_load": 0.9,  # the same for training arriving after the initial backlog
    "interval": 0.0,  # 0: per job from PER_JOB_INTERVALS
    "save": 120.0,
    "restore": 180.0,
}


def _pod(gpus: int) -> PodSpec:
    return PodSpec.of(gpus, cpu_milli=8_000 * gpus, memory_mib=64 * 1024 * gpus)


def build_preemption(seed: int, params: Mapping[str, str]) -> Trace:
    values = read_params("preemption", params, PREEMPTION_DEFAULTS)
    nodes, hours = int(values["nodes"]), float(values["hours"])
    if nodes < 1 or hours <= 0:
        raise TraceError("preemption: nodes and hours must be positive")
    cluster_text = f"{nodes}xdgx-h100;island={nodes}"
    cluster = parse_cluster(cluster_text)
    gpus = cluster.total_gpus
    rng = np.random.default_rng(seed)
    horizon = hours * 3600
    save, restore = float(values["save"]), float(values["restore"])
    interval = float(values["interval"])

    jobs: list[JobSpec] = []
    checkpoints: dict[str, Checkpointing] = {}
    low_sizes, low_min, low_max = (4, 8), 2 * 3600.0, 8 * 3600.0
    low_mean = 6.0 * log_uniform_mean(low_min, low_max)  # mean GPUs x mean duration
    backlog = int(np.ceil(1.5 * gpus / 6.0))  # half again what the cluster holds
    low_rate = float(values["low_load"]) * gpus / low_mean
    low_count = backlog + int(low_rate * horizon)
    low_submit = (
        np.concatenate([np.zeros(backlog), poisson_times(rng, low_rate, low_count - backlog)])
        if low_rate
        else np.zeros(backlog)
    )
    low_count = len(low_submit)
    low_gpus = rng.choice(low_sizes, size=low_count)
    low_duration = log_uniform(rng, low_min, low_max, low_count)
    low_interval = rng.choice(PER_JOB_INTERVALS, size=low_count)
    for index in range(low_count):
        if low_submit[index] > horizon:
            break
        job_id = f"train-{index:04d}"
        jobs.append(
            JobSpec(
                job_id,
                float(low_submit[index]),
                round(float(low_duration[index]), 3),
                (_pod(int(low_gpus[index])),),
                LOW,
                "research",
            )
        )
        every = interval or float(low_interval[index])
        checkpoints[job_id] = Checkpointing(every, save, restore)

    high_sizes = np.array([1, 2, 4, 8])
    high_min, high_max = 900.0, 3600.0
    high_mean = float(high_sizes.mean()) * log_uniform_mean(high_min, high_max)
    high_rate = float(values["high_load"]) * gpus / high_mean
    if high_rate > 0:
        high_count = max(1, int(high_rate * horizon))
        high_submit = poisson_times(rng, high_rate, high_count, start=1800.0)
        high_gpus = rng.choice(high_sizes, size=high_count)
        high_duration = log_uniform(rng, high_min, high_max, high_count)
        for index in range(high_count):
            if high_submit[index] > horizon:
                break
            job_id = f"urgent-{index:04d}"
            pod = _pod(int(high_gpus[index]))
            jobs.append(
                JobSpec(job_id, float(high_submit[index]), round(float(high_duration[index]), 3), (pod,), HIGH, "prod")
            )
            checkpoints[job_id] = NEVER
    jobs.sort(key=lambda job: (job.submit, job.job_id))
    return Trace(
        name="preemption",
        cluster=cluster,
        jobs=tuple(jobs),
        description=(
            f"{sum(j.priority == LOW for j in jobs)} low-priority training jobs (backlog of {backlog} at t=0) and "
            f"{sum(j.priority == HIGH for j in jobs)} high-priority jobs over {hours:g} h on {cluster_text}; "
            f"checkpoint every {'15/30/60 min' if not interval else f'{interval:g} s'}, save {save:g} s, "
            f"restore {restore:g} s; seed {seed}"
        ),
        cluster_text=cluster_text,
        physics=TracePhysics(checkpoints=CheckpointCosts(checkpoints, save, restore)),
    )
