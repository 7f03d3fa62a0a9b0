"""GPU cluster scheduling simulator: engine, policies, traces, metrics, reports."""

from gpuslice.sim.clusters import parse_cluster
from gpuslice.sim.compare import DEFAULT_POLICIES, Comparison, compare
from gpuslice.sim.engine import Engine, SimConfig
from gpuslice.sim.metrics import SimResult
from gpuslice.sim.model import ClusterSpec, JobSpec, PodSpec, SimModelError, SimNode
from gpuslice.sim.policies import POLICIES, PlacementPolicy, make_policy
from gpuslice.sim.queue import ORDERS, QueueOrder

__all__ = [
    "DEFAULT_POLICIES",
    "ORDERS",
    "POLICIES",
    "ClusterSpec",
    "Comparison",
    "Engine",
    "JobSpec",
    "PlacementPolicy",
    "PodSpec",
    "QueueOrder",
    "SimConfig",
    "SimModelError",
    "SimNode",
    "SimResult",
    "compare",
    "make_policy",
    "parse_cluster",
]
