"""The trace file's optional physics columns: tenant weights, checkpoint intervals, GPU memory for the sharing tiers.

Each column that the header row names attaches its extension to every run of the trace (TracePhysics):

- `tenant_weight`: the DRF weight of the row's tenant (> 0; empty: 1). Every row of one tenant that gives a
  weight must give the same one. Attaches the fairness listener; `wdrf` uses the weights.
- `checkpoint_interval`: seconds between checkpoints of the row's job (> 0; empty or `none`: never
  checkpoints). Save and restore cost the `# checkpoint_save:` and `# checkpoint_restore:` headers
  (default 120 s and 180 s). Attaches the checkpoint listener; `preempt` variants use it.
- `gpu_memory_mib`: the GPU memory a fractional job needs (> 0; empty: its share of the GPU's memory). A
  trace with this column runs on the sharing tiers, whose variants are the sharing plans.

Job-level values must agree on every row of a job; errors name the file, the line and the column.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TypeVar

from gpuslice.sim.extensions.checkpoint import NEVER, Checkpointing
from gpuslice.sim.traces.trace import CheckpointCosts, Trace, TraceError, TracePhysics

PHYSICS_COLUMNS = ("tenant_weight", "checkpoint_interval", "gpu_memory_mib")
MAX_WEIGHT = 1e6
MAX_INTERVAL = 10 * 365 * 86_400  # seconds, as the trace's other times
MAX_GPU_MEMORY_MIB = 1 << 24  # 16 TiB: more than any GPU has
DEFAULT_COSTS = CheckpointCosts()
V = TypeVar("V")


class PhysicsColumns:
    """Collects the physics columns row by row and builds the trace's TracePhysics at the end."""

    def __init__(self, columns: Sequence[str]) -> None:
        self.present = frozenset(column for column in PHYSICS_COLUMNS if column in columns)
        self.weights: dict[str, tuple[float, int]] = {}  # tenant -> (weight, first line)
        self.intervals: dict[str, tuple[float | None, int]] = {}  # job -> (interval, first line)
        self.memory: dict[str, tuple[int | None, int]] = {}

    def add(self, row: Mapping[str, str], job_id: str, tenant: str, where: str, number: int) -> None:
        if "tenant_weight" in self.present and row["tenant_weight"]:
            weight = _positive(row["tenant_weight"], "tenant_weight", where, MAX_WEIGHT)
            _agree(self.weights, tenant, weight, f"tenant {tenant!r}", "tenant_weight", where, number)
        if "checkpoint_interval" in self.present:
            text = row["checkpoint_interval"]
            interval = (
                None if text.lower() in ("", "none") else _positive(text, "checkpoint_interval", where, MAX_INTERVAL)
            )
            _agree(self.intervals, job_id, interval, f"job {job_id!r}", "checkpoint_interval", where, number)
        if "gpu_memory_mib" in self.present:
            text = row["gpu_memory_mib"]
            memory = None if not text else _whole(text, "gpu_memory_mib", where, MAX_GPU_MEMORY_MIB)
            _agree(self.memory, job_id, memory, f"job {job_id!r}", "gpu_memory_mib", where, number)

    def physics(self, headers: Mapping[str, str], source: str) -> TracePhysics:
        checkpoints = None
        if "checkpoint_interval" in self.present:
            save = _header_seconds(headers, "checkpoint_save", DEFAULT_COSTS.save, source)
            restore = _header_seconds(headers, "checkpoint_restore", DEFAULT_COSTS.restore, source)
            every = {
                job: NEVER if interval is None else Checkpointing(interval, save, restore)
                for job, (interval, _) in self.intervals.items()
            }
            checkpoints = CheckpointCosts(every, save, restore)
        weights = {tenant: weight for tenant, (weight, _) in self.weights.items()}
        memory = {job: mib for job, (mib, _) in self.memory.items() if mib is not None}
        return TracePhysics(
            checkpoints=checkpoints,
            tenant_weights=weights if "tenant_weight" in self.present else None,
            gpu_memory=memory if "gpu_memory_mib" in self.present else None,
        )


def _agree(seen: dict[str, tuple[V, int]], key: str, value: V, what: str, column: str, where: str, number: int) -> None:
    known = seen.get(key)
    if known is None:
        seen[key] = (value, number)
    elif known[0] != value:
        raise TraceError(f"{where}: {column}: {what} has {known[0]} on line {known[1]}, here {value}")


def _positive(text: str, column: str, where: str, limit: float) -> float:
    try:
        value = float(text)
    except ValueError:
        raise TraceError(f"{where}: {column}: not a number: {text!r}") from None
    if not (math.isfinite(value) and 0 < value <= limit):
        raise TraceError(f"{where}: {column}: must be above 0 and at most {limit:g}, got {text!r}")
    return value


def _whole(text: str, column: str, where: str, limit: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise TraceError(f"{where}: {column}: not a whole number: {text!r}") from None
    if not 0 < value <= limit:
        raise TraceError(f"{where}: {column}: must be 1 to {limit}, got {value}")
    return value


def _header_seconds(headers: Mapping[str, str], key: str, default: float, source: str) -> float:
    text = headers.get(key)
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        raise TraceError(f"{source}: header {key}: not a number of seconds: {text!r}") from None
    if not (math.isfinite(value) and 0 <= value <= MAX_INTERVAL):
        raise TraceError(f"{source}: header {key}: must be 0 to {MAX_INTERVAL} seconds, got {text!r}")
    return value


def physics_columns(trace: Trace) -> list[str]:
    """The physics columns a written trace needs to carry its physics."""
    physics = trace.physics
    present = []
    if physics.tenant_weights is not None:
        present.append("tenant_weight")
    if physics.checkpoints is not None:
        present.append("checkpoint_interval")
    if physics.gpu_memory is not None:
        present.append("gpu_memory_mib")
    return present


def physics_cells(trace: Trace, job_id: str, tenant: str, columns: Sequence[str]) -> list[str]:
    physics = trace.physics
    cells = []
    for column in columns:
        if column == "tenant_weight":
            weight = (physics.tenant_weights or {}).get(tenant)
            cells.append("" if weight is None else f"{weight:g}")
        elif column == "checkpoint_interval":
            every = physics.checkpoints.checkpoints.get(job_id) if physics.checkpoints is not None else None
            cells.append("" if every is None or every.interval is None else f"{every.interval:g}")
        else:
            memory = (physics.gpu_memory or {}).get(job_id)
            cells.append("" if memory is None else str(memory))
    return cells
