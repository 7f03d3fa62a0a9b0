"""The `sharing` trace: mostly fractional inference plus some whole-GPU training, for the sharing-tier comparison.

Inference jobs ask for a fraction of an H100 80GB and some GPU memory, in four sizes chosen to land on
different MIG profiles (1g.10gb, 2g.20gb, 3g.40gb, 4g.40gb) and MPS replica counts; they run 15 min to
2 h. Training jobs take 1, 2, 4 or 8 whole GPUs for 1 to 6 h. Poisson arrivals; `load` is the offered
compute (the GPU work the jobs would do alone) as a share of the cluster.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from gpuslice.sim.core.clusters import parse_cluster
from gpuslice.sim.core.model import JobSpec, PodSpec
from gpuslice.sim.traces.ext_common import log_uniform, log_uniform_mean, poisson_times, read_params
from gpuslice.sim.traces.trace import Trace, TraceError, TracePhysics
from gpuslice.units import GIB

# name, weight, compute fraction, GPU memory GiB
INFERENCE = (("small", 0.35, 0.10, 6), ("medium", 0.30, 0.25, 16), ("large", 0.20, 0.40, 30), ("xl", 0.15, 0.50, 36))
TRAINING = ((1, 0.4), (2, 0.3), (4, 0.2), (8, 0.1))
SHARING_DEFAULTS: dict[str, int | float | str] = {"nodes": 8, "jobs": 1500, "load": 0.9, "inference": 0.85}


def build_sharing(seed: int, params: Mapping[str, str]) -> Trace:
    values = read_params("sharing", params, SHARING_DEFAULTS)
    nodes, count, share = int(values["nodes"]), int(values["jobs"]), float(values["inference"])
    if nodes < 1 or count < 1 or not 0 <= share <= 1:
        raise TraceError("sharing: nodes and jobs must be at least 1, inference a share in [0, 1]")
    cluster_text = f"{nodes}xdgx-h100;island={nodes}"
    cluster = parse_cluster(cluster_text)
    rng = np.random.default_rng(seed)
    inf_low, inf_high, train_low, train_high = 900.0, 7200.0, 3600.0, 6 * 3600.0
    mean_fraction = sum(weight * fraction for _, weight, fraction, _ in INFERENCE)
    mean_gpus = sum(gpus * weight for gpus, weight in TRAINING)
    work = share * mean_fraction * log_uniform_mean(inf_low, inf_high) + (1 - share) * mean_gpus * log_uniform_mean(
        train_low, train_high
    )
    submits = poisson_times(rng, float(values["load"]) * cluster.total_gpus / work, count)
    inference = rng.random(count) < share
    inf_kind = rng.choice(len(INFERENCE), size=count, p=[entry[1] for entry in INFERENCE])
    train_kind = rng.choice(len(TRAINING), size=count, p=[entry[1] for entry in TRAINING])
    inf_duration = log_uniform(rng, inf_low, inf_high, count)
    train_duration = log_uniform(rng, train_low, train_high, count)
    jobs: list[JobSpec] = []
    memory: dict[str, int] = {}
    for index in range(count):
        if inference[index]:
            name, _, fraction, gib = INFERENCE[inf_kind[index]]
            job_id = f"infer-{name}-{index:05d}"
            pod = PodSpec.of(fraction, cpu_milli=4_000, memory_mib=32 * GIB)
            jobs.append(
                JobSpec(job_id, float(submits[index]), round(float(inf_duration[index]), 3), (pod,), tenant="inference")
            )
            memory[job_id] = gib * GIB
        else:
            gpus = TRAINING[train_kind[index]][0]
            pod = PodSpec.of(gpus, cpu_milli=8_000 * gpus, memory_mib=64 * GIB * gpus)
            job_id = f"train-{gpus}-{index:05d}"
            jobs.append(
                JobSpec(
                    job_id, float(submits[index]), round(float(train_duration[index]), 3), (pod,), tenant="training"
                )
            )
    return Trace(
        name="sharing",
        cluster=cluster,
        jobs=tuple(jobs),
        description=(
            f"{count} jobs ({share:.0%} fractional inference, the rest 1-8 GPU training) at offered compute load "
            f"{values['load']:g} on {cluster_text}; seed {seed}"
        ),
        cluster_text=cluster_text,
        physics=TracePhysics(gpu_memory=memory),
    )
