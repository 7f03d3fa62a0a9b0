"""Two gangs that each need more than half the cluster, submitted together: the partial-allocation deadlock.

Placed pod by pod, their pods interleave in the queue (same submit time, so pod 0 of A, pod 0 of B, pod 1
of A, ...), each gang ends up holding half the nodes, neither can complete, and neither lets go. Placed
all-or-nothing, one gang runs, the other waits with nothing bound and runs when the first ends.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpuslice.sim.core.clusters import parse_cluster
from gpuslice.sim.core.model import JobSpec, PodSpec
from gpuslice.sim.traces.trace import Trace, TraceError


def two_gang(nodes: int = 8) -> Trace:
    if nodes < 2 or nodes % 2:
        raise TraceError(f"two-gang: nodes must be an even number >= 2, got {nodes}")
    cluster_text = f"{nodes}xdgx-h100;island={nodes}"
    pod = PodSpec.of(8, cpu_milli=64_000, memory_mib=512 * 1024)
    size = nodes // 2 + 1  # more than half of the nodes, one 8-GPU pod per node
    jobs = tuple(JobSpec(f"gang-{name}", 0.0, 3600.0, (pod,) * size, gang=True) for name in ("a", "b"))
    return Trace(
        name="two-gang",
        cluster=parse_cluster(cluster_text),
        jobs=jobs,
        description=f"two gangs of {size} x 8-GPU pods on {nodes} 8-GPU nodes, submitted together",
        cluster_text=cluster_text,
    )


def build_two_gang(seed: int, params: Mapping[str, str]) -> Trace:
    """Registry entry: deterministic; `nodes` (default 8) scales it."""
    unknown = set(params) - {"nodes"}
    if unknown:
        raise TraceError(f"two-gang: unknown parameter(s) {sorted(unknown)}; known: nodes")
    text = params.get("nodes", "8")
    if not text.isdigit():
        raise TraceError(f"two-gang: nodes must be a whole number, got {text!r}")
    return two_gang(int(text))
