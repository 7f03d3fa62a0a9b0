"""The snapshot as a `sim compare` trace: its GPU nodes as node-spec presets, its pods as one-pod jobs.

`sim compare` builds clusters from presets only (`# cluster: 2xdgx-h100+4xh100x4`), so the trace is written
when every GPU node has a preset of its GPU family and count; otherwise the reason is returned instead.
The API does not say how long a pod will run: every job gets `duration` seconds, said in the header.
"""

from __future__ import annotations

import re
from collections import Counter
from datetime import datetime

from gpuslice.discovery import PRESETS, parse_node_spec
from gpuslice.fsutil.csvsafe import csv_text
from gpuslice.snapshot.model import SnapNode, Snapshot
from gpuslice.units import MILLI

TRACE_FILE = "snapshot-trace.csv"
_FAMILY = re.compile(r"\b([A-Z]{1,2}[0-9]{2,4})\b")  # H100, A100, H200, L40 ... in a product name


def _family(product: str) -> str:
    match = _FAMILY.search(product.upper().replace("-", " "))
    return match[1] if match else ""


def _presets() -> dict[tuple[str, int], str]:
    """(GPU family, GPU count) -> preset name, for the presets without MIG."""
    found: dict[tuple[str, int], str] = {}
    for name in sorted(PRESETS):
        node = parse_node_spec({**PRESETS[name], "name": name}, source=f"preset:{name}").node
        if node.gpus and not any(gpu.mig_enabled for gpu in node.gpus):
            found.setdefault((_family(node.gpus[0].product_name), len(node.gpus)), name)
    return found


def _seconds(stamp: str) -> float | None:
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def compare_trace(snapshot: Snapshot, duration: float) -> tuple[str | None, str]:
    """(the trace text, "") or (None, why it cannot be written)."""
    presets = _presets()
    gpu_nodes = [node for node in snapshot.nodes if node.gpus]
    if not gpu_nodes:
        return None, "the cluster has no GPU nodes"
    missing = [node for node in gpu_nodes if (_family(node.gpu_model), node.gpus) not in presets]
    if missing:
        shown = ", ".join(f"{n.name} ({n.gpus}x {n.gpu_model})" for n in missing[:3])
        known = ", ".join(f"{name} ({count}x {family})" for (family, count), name in sorted(presets.items()))
        return None, f"sim compare builds clusters from presets ({known}); no preset for {shown}"
    order: list[SnapNode] = sorted(gpu_nodes, key=lambda n: presets[(_family(n.gpu_model), n.gpus)])
    groups = Counter(presets[(_family(n.gpu_model), n.gpus)] for n in order)
    cpu, memory = min(n.cpu_milli for n in gpu_nodes), min(n.memory_mib for n in gpu_nodes)
    on_gpu_nodes = {n.name for n in gpu_nodes}
    pods = [pod for pod in snapshot.pods if not pod.node or pod.node in on_gpu_nodes]
    starts = [_seconds(pod.created) for pod in pods]
    first = min((s for s in starts if s is not None), default=0.0)
    header = [
        "# gpuslice-sim-trace: 1",
        "# name: snapshot",
        f"# cluster: {'+'.join(f'{count}x{name}' for name, count in groups.items())};cpu={cpu};memory={memory}",
        f"# description: gpuslice sim snapshot; every pod one job, submitted at its creation, running {duration:g} s "
        "(guessed: the API does not say); CPU and memory per node: the smallest GPU node's",
    ]
    rows = [
        [
            pod.key,
            round((start if start is not None else first) - first, 3),
            duration,
            1,
            pod.num_gpu if pod.gpu_milli == MILLI or not pod.num_gpu else pod.gpu_milli / MILLI,
            pod.cpu_milli,
            pod.memory_mib,
        ]
        for pod, start in zip(pods, starts, strict=True)
    ]
    table = csv_text(("job_id", "submit", "duration", "pods", "gpu", "cpu_milli", "memory_mib"), rows)
    return "\n".join(header) + "\n" + table, ""
