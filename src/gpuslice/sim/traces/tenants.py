"""The `tenants` trace: three tenants with different dominant resources competing for one cluster.

- vision: whole-node 8-GPU training (dominant resource: GPUs); a large burst at t = 0, then a trickle.
- nlp: 1- and 2-GPU jobs all day (GPUs); priority 10, weight 2 (it pays for twice the share).
- etl: CPU-hungry jobs without GPUs (dominant resource: CPU); on a node busy with GPU work only one fits.
FIFO lets the burst take the cluster for hours; priority lets nlp starve the others; DRF gives each
tenant an equal dominant share (weighted DRF: nlp twice the others').
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from gpuslice.sim.core.clusters import parse_cluster
from gpuslice.sim.core.model import JobSpec, PodSpec
from gpuslice.sim.traces.ext_common import log_uniform, poisson_times, read_params
from gpuslice.sim.traces.trace import Trace, TraceError, TracePhysics
from gpuslice.units import GIB

TENANT_DEFAULTS: dict[str, int | float | str] = {"nodes": 8, "hours": 8.0, "burst": 24}
WEIGHTS = {"vision": 1.0, "nlp": 2.0, "etl": 1.0}
PRIORITIES = {"vision": 0, "nlp": 10, "etl": 0}


def build_tenants(seed: int, params: Mapping[str, str]) -> Trace:
    values = read_params("tenants", params, TENANT_DEFAULTS)
    nodes, hours, burst = int(values["nodes"]), float(values["hours"]), int(values["burst"])
    if nodes < 1 or hours <= 0:
        raise TraceError("tenants: nodes and hours must be positive")
    cluster_text = f"{nodes}xdgx-h100;island={nodes}"
    cluster = parse_cluster(cluster_text)
    gpus = cluster.total_gpus
    horizon = hours * 3600
    rng = np.random.default_rng(seed)
    jobs: list[JobSpec] = []

    def add(tenant: str, prefix: str, submits: np.ndarray, durations: np.ndarray, pods: list[PodSpec]) -> None:
        for index, (submit, duration, pod) in enumerate(zip(submits, durations, pods, strict=True)):
            if submit <= horizon:
                jobs.append(
                    JobSpec(
                        f"{prefix}-{index:04d}",
                        float(submit),
                        round(float(duration), 3),
                        (pod,),
                        PRIORITIES[tenant],
                        tenant,
                    )
                )

    vision_pod = PodSpec.of(8, cpu_milli=64_000, memory_mib=512 * GIB)
    trickle = max(1, int(hours))  # one more every hour
    vision_submit = np.concatenate([np.zeros(burst), np.round(np.arange(1, trickle + 1) * 3600.0, 3)])
    add(
        "vision",
        "vision",
        vision_submit,
        log_uniform(rng, 2 * 3600, 4 * 3600, len(vision_submit)),
        [vision_pod] * len(vision_submit),
    )

    # nlp alone would keep about half the GPUs busy: 1.5 GPUs x ~50 min per job.
    nlp_count = int(0.5 * gpus / (1.5 * 3000) * horizon)
    nlp_sizes = rng.choice([1, 2], size=nlp_count)
    nlp_pods = [
        PodSpec.of(int(size), cpu_milli=8_000 * int(size), memory_mib=64 * GIB * int(size)) for size in nlp_sizes
    ]
    nlp_submit = poisson_times(rng, nlp_count / horizon, nlp_count, start=300.0)
    add("nlp", "nlp", nlp_submit, log_uniform(rng, 1800, 5400, nlp_count), nlp_pods)

    # etl alone would want about 60 % of the cores: 48 cores per job, ~85 min each.
    cores = sum(node.cpu_milli for node in cluster.nodes) / 1000
    etl_pod = PodSpec.of(0, cpu_milli=48_000, memory_mib=256 * GIB)
    etl_count = int(0.6 * cores / 48 * horizon / 5200)
    etl_submit = poisson_times(rng, etl_count / horizon, etl_count, start=60.0)
    add("etl", "etl", etl_submit, log_uniform(rng, 3600, 7200, etl_count), [etl_pod] * etl_count)

    jobs.sort(key=lambda job: (job.submit, job.job_id))
    return Trace(
        name="tenants",
        cluster=cluster,
        jobs=tuple(jobs),
        description=(
            f"3 tenants over {hours:g} h on {cluster_text}: vision (8-GPU, burst of {burst} at t=0), nlp (1-2 GPUs, "
            f"priority 10, weight 2), etl (no GPU, 48 cores each); seed {seed}"
        ),
        cluster_text=cluster_text,
        physics=TracePhysics(tenant_weights=dict(WEIGHTS)),
    )
