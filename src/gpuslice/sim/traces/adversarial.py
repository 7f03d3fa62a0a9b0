"""A trace built so that first-fit strands GPUs and best-fit does not.

Phase 1 (t = 0) leaves holes: on the first `pairs` nodes a long 4-GPU job beside a short 4-GPU job, on the
next `pairs` nodes a long 7-GPU job beside a short 1-GPU job. Both policies build this same layout (on an
empty cluster best-fit's ties fall to the lowest node, as first-fit's scan does). The short jobs end at
t = 60: 4-GPU holes on the low nodes, 1-GPU holes on the high ones.
Phase 2 (t = 120): `pairs` long 1-GPU jobs. First-fit drops them into the first hole it meets, the 4-GPU
holes; best-fit puts each into a 1-GPU hole, where it leaves nothing behind.
Phase 3 (t = 180): a backlog of 4 x `pairs` two-hour 4-GPU jobs. Best-fit runs `pairs` of them at a time,
one per 4-GPU hole. First-fit has lost a quarter of those holes, so it runs fewer at a time and the backlog
lasts longer, while the `pairs` free GPUs in 1-GPU holes stay free the whole time: stranded, because no
waiting pod fits where they are. Everything else runs 8 hours, so first-fit also finishes later.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpuslice.sim.core.clusters import parse_cluster
from gpuslice.sim.core.model import JobSpec, PodSpec
from gpuslice.sim.traces.trace import Trace, TraceError
from gpuslice.units import HOUR


def _pod(gpus: int) -> PodSpec:
    return PodSpec.of(gpus, cpu_milli=8_000 * gpus, memory_mib=64 * 1024 * gpus)


def adversarial(pairs: int = 8) -> Trace:
    if pairs < 1:
        raise TraceError(f"adversarial: pairs must be at least 1, got {pairs}")
    cluster_text = f"{2 * pairs}xdgx-h100;island=4"
    jobs: list[JobSpec] = []
    for i in range(pairs):
        jobs.append(JobSpec(f"hole4-long-{i}", 0.0, 8 * HOUR, (_pod(4),)))
        jobs.append(JobSpec(f"hole4-short-{i}", 0.0, 60.0, (_pod(4),)))
    for i in range(pairs):
        jobs.append(JobSpec(f"hole1-long-{i}", 0.0, 8 * HOUR, (_pod(7),)))
        jobs.append(JobSpec(f"hole1-short-{i}", 0.0, 60.0, (_pod(1),)))
    jobs.extend(JobSpec(f"small-{i}", 120.0, 8 * HOUR, (_pod(1),)) for i in range(pairs))
    jobs.extend(JobSpec(f"wide-{i}", 180.0, 2 * HOUR, (_pod(4),)) for i in range(4 * pairs))
    return Trace(
        name="adversarial",
        cluster=parse_cluster(cluster_text),
        jobs=tuple(jobs),
        description=f"holes of 4 GPUs before holes of 1 GPU, then {pairs} 1-GPU jobs and {4 * pairs} 4-GPU jobs",
        cluster_text=cluster_text,
    )


def build_adversarial(seed: int, params: Mapping[str, str]) -> Trace:
    """Registry entry: deterministic, so the seed is unused; `pairs` (default 8) scales it."""
    unknown = set(params) - {"pairs"}
    if unknown:
        raise TraceError(f"adversarial: unknown parameter(s) {sorted(unknown)}; known: pairs")
    text = params.get("pairs", "8")
    if not text.isdigit():
        raise TraceError(f"adversarial: pairs must be a whole number, got {text!r}")
    return adversarial(int(text))
