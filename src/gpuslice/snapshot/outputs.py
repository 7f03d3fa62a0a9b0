"""`sim snapshot --out DIR`: the cluster and its pods as an openb trace folder, and the what-if as JSON."""

from __future__ import annotations

import json
from pathlib import Path

from gpuslice.fgd.trace import NODE_COLUMNS, NODE_FILE, POD_COLUMNS, POD_PREFIX
from gpuslice.fsutil.atomic import atomic_write_text
from gpuslice.fsutil.csvsafe import csv_text
from gpuslice.snapshot.compare_trace import TRACE_FILE, compare_trace
from gpuslice.snapshot.render import to_json
from gpuslice.snapshot.whatif import WhatIf

WORKLOAD = "snapshot"


def write_snapshot_outputs(result: WhatIf, folder: str | Path, duration: float) -> tuple[list[Path], str]:
    """`openb_node_list_gpu_node.csv` and `openb_pod_list_snapshot.csv` (read by `sim openb --trace-dir DIR
    --workload snapshot`, which then inflates the pod mix to 1.3x the GPUs as the FGD paper does) and
    `snapshot.json` (what --json prints), and `snapshot-trace.csv` for `sim compare --trace` where every GPU
    node has a preset (else the second value says why not). Each file goes to a temp file, then is renamed."""
    target = Path(folder)
    snapshot = result.snapshot
    nodes = csv_text(
        NODE_COLUMNS,
        ([n.name, n.cpu_milli, n.memory_mib, n.gpus, n.gpu_model] for n in snapshot.nodes),
    )
    pods = csv_text(
        (*POD_COLUMNS, "gpu_spec"),
        ([p.key, p.cpu_milli, p.memory_mib, p.num_gpu, p.gpu_milli, p.spec] for p in snapshot.pods),
    )
    written = [
        atomic_write_text(target / NODE_FILE, nodes),
        atomic_write_text(target / f"{POD_PREFIX}{WORKLOAD}.csv", pods),
        atomic_write_text(target / "snapshot.json", json.dumps(to_json(result), indent=1) + "\n"),
    ]
    trace, why_not = compare_trace(snapshot, duration)
    if trace is not None:
        written.append(atomic_write_text(target / TRACE_FILE, trace))
    return written, why_not
