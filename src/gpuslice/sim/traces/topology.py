"""The `topology` trace: 1- to 8-GPU jobs on nodes whose GPUs are not all alike to each other.

Nodes (param `node`): dgx1-v100 (the hybrid cube-mesh: one NVLink island, but not every 4-GPU subset
has an NVLink ring), quads (two 4-GPU NVLink islands per node, joined by PCIe and the CPU link; an
illustration, as two 4-GPU NVLink boards in one host), or dgx-h100 (NVSwitch: any subset of a node is one
island, so only splitting across nodes costs). Jobs: 1, 2, 4 and 8 GPUs in one pod, 4 GPUs as a gang
of 2 x 2 and 8 GPUs as a gang of 2 x 4, Poisson arrivals at offered load `load`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from gpuslice.discovery import NodeSpecError, parse_node_spec
from gpuslice.sim.core.model import ClusterSpec, JobSpec, PodSpec, SimNode
from gpuslice.sim.extensions.nvlink import Penalties
from gpuslice.sim.traces.ext_common import log_uniform, log_uniform_mean, poisson_times, read_params
from gpuslice.sim.traces.trace import NvlinkLinks, Trace, TraceError, TracePhysics
from gpuslice.topology import Topology, topology_from_spec

TOPOLOGY_DEFAULTS: dict[str, int | float | str] = {
    "node": "dgx1-v100",
    "nodes": 16,
    "island": 4,
    "jobs": 600,
    "load": 0.85,
    "split_penalty": Penalties.split,
    "node_penalty": Penalties.node,
}
# (weight, pods, GPUs per pod, gang)
MIX = (
    (0.30, 1, 1, False),
    (0.20, 1, 2, False),
    (0.15, 1, 4, False),
    (0.10, 2, 2, True),
    (0.10, 1, 8, False),
    (0.15, 2, 4, True),
)

_V100 = {"model": "Tesla V100-SXM2-32GB", "memory_mib": 32768, "compute_capability": "7.0"}
_A100 = {"model": "NVIDIA A100-SXM4-40GB", "memory_mib": 40960, "compute_capability": "8.0"}
_H100 = {"model": "NVIDIA H100 80GB HBM3", "memory_mib": 81559, "compute_capability": "9.0"}
NODE_KINDS: dict[str, dict[str, Any]] = {
    "dgx1-v100": {
        "gpus": [{**_V100, "count": 4, "numa_node": 0}, {**_V100, "count": 4, "numa_node": 1}],
        "topology": {"preset": "dgx1-v100"},
    },
    "quads": {
        "gpus": [{**_A100, "count": 4, "numa_node": 0}, {**_A100, "count": 4, "numa_node": 1}],
        "topology": {
            "links": [
                {"gpus": [0, 1, 2, 3], "link": "nvlink", "count": 4},
                {"gpus": [4, 5, 6, 7], "link": "nvlink", "count": 4},
            ]
        },
    },
    "dgx-h100": {
        "gpus": [{**_H100, "count": 4, "numa_node": 0}, {**_H100, "count": 4, "numa_node": 1}],
        "topology": {"preset": "dgx-h100"},
    },
}


def topology_cluster(kind: str, nodes: int, island: int) -> tuple[ClusterSpec, tuple[Topology, ...]]:
    """`nodes` nodes of one kind (see NODE_KINDS), `island` nodes per node island, with their topologies."""
    if kind not in NODE_KINDS:
        raise TraceError(f"topology: node must be one of {', '.join(NODE_KINDS)}, got {kind!r}")
    built: list[SimNode] = []
    topologies: list[Topology] = []
    for position in range(nodes):
        name = f"node-{position:04d}"
        try:
            spec = parse_node_spec({**NODE_KINDS[kind], "name": name}, source=f"topology:{kind}")
        except NodeSpecError as exc:
            raise TraceError(f"topology: {exc}") from exc
        count = len(spec.node.gpus)
        built.append(
            SimNode(name, spec.node.gpus, 10_000 * count, 64 * 1024 * count, f"island-{position // island:03d}")
        )
        topologies.append(topology_from_spec(spec.topology, spec.node.gpus))
    return ClusterSpec(tuple(built), description=f"{nodes}x{kind};island={island}"), tuple(topologies)


def build_topology(seed: int, params: Mapping[str, str]) -> Trace:
    values = read_params("topology", params, TOPOLOGY_DEFAULTS)
    nodes, island, count = int(values["nodes"]), int(values["island"]), int(values["jobs"])
    if nodes < 1 or island < 1 or count < 1:
        raise TraceError("topology: nodes, island and jobs must be at least 1")
    cluster, topologies = topology_cluster(str(values["node"]), nodes, island)
    penalties = Penalties(float(values["split_penalty"]), float(values["node_penalty"]))
    rng = np.random.default_rng(seed)
    low, high = 1800.0, 4 * 3600.0
    weights = np.array([entry[0] for entry in MIX])
    mean_gpus = float(sum(w * pods * per for w, pods, per, _ in MIX))
    rate = float(values["load"]) * cluster.total_gpus / (mean_gpus * log_uniform_mean(low, high))
    submits = poisson_times(rng, rate, count)
    classes = rng.choice(len(MIX), size=count, p=weights / weights.sum())
    durations = log_uniform(rng, low, high, count)
    jobs = []
    for index, klass in enumerate(classes.tolist()):
        _, pods, per, gang = MIX[klass]
        pod = PodSpec.of(per, cpu_milli=8_000 * per, memory_mib=48 * 1024 * per)
        jobs.append(
            JobSpec(
                f"job-{index:05d}", float(submits[index]), round(float(durations[index]), 3), (pod,) * pods, gang=gang
            )
        )
    return Trace(
        name="topology",
        cluster=cluster,
        jobs=tuple(jobs),
        description=(
            f"{count} jobs of 1-8 GPUs at offered load {values['load']:g} on {cluster.description}; a job without an "
            f"NVLink ring runs {penalties.split:g} longer, one across nodes {penalties.node:g}; seed {seed}"
        ),
        cluster_text="",
        physics=TracePhysics(nvlink=NvlinkLinks(topologies, penalties)),
    )
