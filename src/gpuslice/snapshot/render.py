"""A what-if as JSON (`--json`) and as text tables (the default)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpuslice.snapshot.whatif import WhatIf

MAX_NODE_COLUMNS_ROWS = 64  # the per-node table is printed for clusters up to this many GPU nodes


def to_json(result: WhatIf) -> dict[str, Any]:
    snapshot = result.snapshot
    current = result.outcomes[0]
    return {
        "gpus_total": snapshot.gpus_total,
        "gpus_allocated": round(current.allocated_gpus, 3),
        "nodes": len(snapshot.nodes),
        "gpu_nodes": sum(1 for node in snapshot.nodes if node.gpus),
        "pods": {"bound": len(snapshot.bound), "pending": len(snapshot.pending)},
        "dra": snapshot.dra,
        "cluster": [
            {
                "node": node.name,
                "gpus": node.gpus,
                "gpu_model": node.gpu_model,
                "gpu_memory_mib": node.gpu_memory_mib,
                "sharing": node.sharing,
                "replicas": node.replicas,
                "mig": dict(node.mig),
                "cpu_milli": node.cpu_milli,
                "memory_mib": node.memory_mib,
            }
            for node in snapshot.nodes
        ],
        "policies": {
            outcome.policy: {
                "largest_fit": outcome.largest_fit,
                "free_gpus": outcome.free_gpus,
                "free_gpus_per_node": outcome.free_gpus_per_node,
                "fragmented_gpus": outcome.fragmented_gpus,
                "allocated_gpus": round(outcome.allocated_gpus, 3),
                "unplaced": list(outcome.unplaced),
            }
            for outcome in result.outcomes
        },
        "guesses": list(snapshot.guesses),
        "model_notes": list(result.model_notes),
        "skipped": list(snapshot.skipped),
    }


def text_tables(result: WhatIf) -> list[str]:
    """Plain text, never truncated: the summary, one row per policy, the free GPUs per node, the guesses."""
    snapshot = result.snapshot
    current = result.outcomes[0]
    lines = [
        f"{len(snapshot.nodes)} nodes ({sum(1 for n in snapshot.nodes if n.gpus)} with GPUs), "
        f"{snapshot.gpus_total} GPUs, {current.allocated_gpus:.3f} allocated; "
        f"{len(snapshot.bound)} pods bound, {len(snapshot.pending)} pending; DRA {snapshot.dra}",
        "",
    ]
    header = ("policy", "free GPUs", "largest fit", "fragmented GPUs (FGD)", "allocated GPUs", "pods not placed")
    rows = [
        (
            o.policy,
            str(o.free_gpus),
            str(o.largest_fit),
            "-" if o.fragmented_gpus is None else f"{o.fragmented_gpus:.3f}",
            f"{o.allocated_gpus:.3f}",
            str(len(o.unplaced)),
        )
        for o in result.outcomes
    ]
    lines += _table(header, rows)
    gpu_nodes = [node.name for node in snapshot.nodes if node.gpus]
    if 0 < len(gpu_nodes) <= MAX_NODE_COLUMNS_ROWS:
        lines += ["", "free whole GPUs per node:"]
        node_header = ("node", *(o.policy for o in result.outcomes))
        node_rows = [(name, *(str(o.free_gpus_per_node[name]) for o in result.outcomes)) for name in gpu_nodes]
        lines += _table(node_header, node_rows)
    for title, notes in (
        ("guessed", snapshot.guesses),
        ("not in the model", result.model_notes),
        ("skipped", snapshot.skipped),
    ):
        if notes:
            lines += ["", f"{title}:", *(f"  {note}" for note in notes)]
    return lines


def _table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> list[str]:
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows, strict=True)]

    def line(cells: tuple[str, ...]) -> str:
        first, *rest = cells
        return "  ".join([first.ljust(widths[0]), *(c.rjust(w) for c, w in zip(rest, widths[1:], strict=True))])

    return [line(header), "  ".join("-" * w for w in widths), *(line(row) for row in rows)]
