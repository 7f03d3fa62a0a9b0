"""A trace: the cluster it runs on, the jobs that arrive, a name for reports, and the physics it needs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from gpuslice.sim.core.model import ClusterSpec, JobSpec
from gpuslice.sim.extensions.checkpoint import Checkpointing
from gpuslice.sim.extensions.nvlink import Penalties
from gpuslice.topology import Topology


@dataclass(frozen=True)
class CheckpointCosts:
    """Jobs checkpoint (job id -> Checkpointing; absent: never), at these save and restore costs in seconds."""

    checkpoints: Mapping[str, Checkpointing] = field(default_factory=dict)
    save: float = 120.0
    restore: float = 180.0


@dataclass(frozen=True)
class NvlinkLinks:
    """Each node's GPU topology (aligned with cluster.nodes) and the slowdown of a job without an NVLink ring."""

    topologies: tuple[Topology, ...] = ()
    penalties: Penalties = field(default_factory=Penalties)
    preset: str = ""  # the `# topology:` header it was built from (written back to CSV); empty: built in code


@dataclass(frozen=True)
class TracePhysics:
    """What a trace needs simulated beyond placement; each field that is set attaches its extension to every
    run of the trace, whatever the variant (the mapping is in sim.experiments.variants).

    checkpoints: jobs checkpoint and pay for it (the Checkpoints listener; preemption variants use it).
    tenant_weights: tenants and their DRF weights (the Fairness listener; `wdrf` uses the weights).
    nvlink: per-node NVLink topologies (the TopologyPenalty listener; `nvlink-aware` uses the topologies).
    gpu_memory: GPU memory each fractional job needs, MiB (the trace runs on the sharing-tier simulator,
    whose variants are sharing plans).
    """

    checkpoints: CheckpointCosts | None = None
    tenant_weights: Mapping[str, float] | None = None
    nvlink: NvlinkLinks | None = None
    gpu_memory: Mapping[str, int] | None = None


@dataclass(frozen=True)
class Trace:
    name: str
    cluster: ClusterSpec
    jobs: tuple[JobSpec, ...]
    description: str = ""
    cluster_text: str = ""  # the one-line cluster spec it was built from (written to CSV headers)
    physics: TracePhysics = field(default_factory=TracePhysics)


class TraceError(ValueError):
    """A trace that cannot be built or read; the message names the file, line or parameter."""
