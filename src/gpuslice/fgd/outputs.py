"""`sim openb --out DIR`: per-pod placements (pods.csv), the arrived-GPU timeline (timeline.csv), summary.json."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from gpuslice.fgd.engine import Workload
from gpuslice.fgd.policies import PolicyContext, make_policy
from gpuslice.fgd.protocol import plan_arrivals
from gpuslice.fgd.state import OpenbCluster
from gpuslice.fgd.sweep import workload
from gpuslice.fsutil.atomic import atomic_text_writer, atomic_write_text
from gpuslice.fsutil.csvsafe import SafeCsvWriter
from gpuslice.units import MILLI

Record = dict[str, Any]
PLACEMENT_COLUMNS = (
    "workload",
    "policy",
    "seed",
    "arrival_index",
    "pod",
    "clone",
    "gpu_milli",
    "num_gpu",
    "status",
    "node",
    "gpus",
    "arrived_gpus",
    "allocated_gpus",
)
ARRIVED_TIMELINE_COLUMNS = (
    "workload",
    "policy",
    "seed",
    "arrived_pct",
    "bin_arrived_gpus",
    "allocated_gpus",
    "unallocated_gpus",
    "fragmented_gpus",
    "frag_rate_pct",
)


def placement_rows(workload: Workload, policy_name: str, seed: int, ratio: float) -> Iterator[list[Any]]:
    """One row per arrived pod of one run, in arrival order: where it went, or `failed`.

    The same steps as engine.run_plan (the plan, the tie order, place then bind then bound), kept apart
    from that hot loop so that it records nothing it does not need; a test checks both agree."""
    trace = workload.trace
    plan = plan_arrivals(trace.pods, len(trace.nodes.names), workload.total_gpus, seed, ratio)
    cluster = OpenbCluster(trace.nodes, plan.node_prefix.argsort(kind="stable"), workload.tasks)
    shapes = workload.shapes.shapes
    policy = make_policy(policy_name, PolicyContext(cluster, shapes, workload.typical, plan.rng))
    seen: set[int] = set()
    arrived = 0
    for position, index in enumerate(plan.order.tolist()):
        shape = shapes[int(workload.shapes.pod_shape[index])]
        memory = int(trace.pods.memory[index])
        arrived += shape.gpu_request
        clone = index in seen
        seen.add(index)
        placement = policy.place(shape, memory)
        node = gpus = ""
        if placement is not None:
            cluster.bind(placement.node, placement.gpus, shape.cpu, memory, shape.gpu_milli)
            policy.bound(placement, shape)
            node, gpus = cluster.names[placement.node], " ".join(map(str, placement.gpus))
        yield [
            workload.name,
            policy_name,
            seed,
            position + 1,
            trace.pods.names[index],
            str(clone).lower(),
            int(trace.pods.gpu_milli[index]),
            int(trace.pods.num_gpu[index]),
            "failed" if placement is None else "placed",
            node,
            gpus,
            _gpus(arrived),
            _gpus(cluster.allocated_milli),
        ]


def timeline_rows(record: Record) -> Iterator[list[Any]]:
    """The record's curve as GPU counts: one row per whole arrived % that has a value."""
    total = record["total_gpus"]
    for point in record["curve"]:
        allocated_pct, frag_pct = point["allocated_gpu_pct"], point["frag_amount_pct"]
        if allocated_pct is None or frag_pct is None:
            continue  # no pod arrived near this point (past --ratio, say)
        yield [
            record["workload"],
            record["policy"],
            record["seed"],
            point["arrived_pct"],
            round(point["arrived_pct"] * total / 100, 3),
            round(allocated_pct * total / 100, 3),
            round((100 - allocated_pct) * total / 100, 3),
            round(frag_pct * total / 100, 3),
            point["frag_rate_pct"],
        ]


def write_openb_outputs(records: Sequence[Record], folder: str | Path, trace_dir: Path) -> list[Path]:
    """pods.csv (every pod of every run, placed again to learn where), timeline.csv and summary.json."""
    target = Path(folder)
    pods, timeline, summary = target / "pods.csv", target / "timeline.csv", target / "summary.json"
    # temp file and rename per file (a planted link is replaced, not followed); formula cells neutralised
    with atomic_text_writer(pods) as stream:
        writer = SafeCsvWriter(stream)
        writer.writerow(PLACEMENT_COLUMNS)
        for record in records:
            loaded = workload(record["workload"], trace_dir)
            writer.writerows(placement_rows(loaded, record["policy"], record["seed"], record["ratio"]))
    with atomic_text_writer(timeline) as stream:
        writer = SafeCsvWriter(stream)
        writer.writerow(ARRIVED_TIMELINE_COLUMNS)
        for record in records:
            writer.writerows(timeline_rows(record))
    atomic_write_text(summary, json.dumps(list(records), indent=1) + "\n")
    return [pods, timeline, summary]


def _gpus(milli: int) -> str:
    return f"{milli / MILLI:.3f}".rstrip("0").rstrip(".") or "0"
