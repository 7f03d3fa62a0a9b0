"""`--out DIR`: per-job records (jobs.csv), fixed-step time series (timeline.csv) and the summary (summary.json)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gpuslice.fsutil.atomic import atomic_text_writer, atomic_write_text
from gpuslice.fsutil.csvsafe import SafeCsvWriter
from gpuslice.sim.core.cluster import Binding
from gpuslice.sim.core.metrics import SimResult
from gpuslice.sim.core.runs import JobRun
from gpuslice.sim.experiments.seeds import SeedSweep

JOB_COLUMNS = (
    "policy",
    "seed",
    "job_id",
    "attempt",
    "status",
    "tenant",
    "priority",
    "gang",
    "pods",
    "gpus",
    "submit",
    "start",
    "end",
    "wait",
    "preemptions",
    "nodes",
    "placement",
)
TIMELINE_COLUMNS = (
    "policy",
    "seed",
    "time",
    "busy_gpus",
    "utilization",
    "allocated_gpus",
    "free_gpus",
    "stranded_gpus",
    "fragmentation",
    "queued_jobs",
)
# The default step divides the run into this many samples; an explicit step may not ask for more per run.
DEFAULT_SAMPLES = 1000
MAX_SAMPLES = 100_000


class OutputError(ValueError):
    """An output request that cannot be honoured (a step too small for the run); the message says why."""


def write_outputs(sweep: SeedSweep, folder: str | Path, step: float | None = None) -> list[Path]:
    """Write jobs.csv, timeline.csv and summary.json for every run of `sweep` into `folder`; the paths written."""
    target = Path(folder)
    written = [target / "jobs.csv", target / "timeline.csv", target / "summary.json"]
    # each file by temp file and rename (a link planted in the folder is replaced, never written through);
    # every CSV cell that a spreadsheet would run as a formula (a job id such as =cmd) gets a leading '
    with atomic_text_writer(written[0]) as stream:
        writer = SafeCsvWriter(stream)
        writer.writerow(JOB_COLUMNS)
        for comparison in sweep.comparisons:
            for result in comparison.results:
                writer.writerows(job_rows(result, comparison.seed))
    with atomic_text_writer(written[1]) as stream:
        writer = SafeCsvWriter(stream)
        writer.writerow(TIMELINE_COLUMNS)
        for comparison in sweep.comparisons:
            for result in comparison.results:
                writer.writerows(timeline_rows(result, comparison.seed, step))
    atomic_write_text(written[2], json.dumps(sweep.to_json(), indent=2) + "\n")
    return written


def job_rows(result: SimResult, seed: int) -> Iterator[list[Any]]:
    """One row per job and attempt: the attempts ended by eviction first, then the job's final state."""
    names = result.node_names
    for run in result.runs:
        spec = run.spec
        common = [spec.tenant, spec.priority, str(spec.gang).lower(), len(spec.pods), _number(spec.gpus)]
        for number, attempt in enumerate(run.attempts, start=1):
            yield [
                result.policy,
                seed,
                spec.job_id,
                number,
                "evicted",
                *common,
                _number(spec.submit),
                _time(attempt.start),
                _number(attempt.end),
                _time(None if attempt.start is None else attempt.start - spec.submit),
                number - 1,
                *_where(attempt.placement, names),
            ]
        yield [
            result.policy,
            seed,
            spec.job_id,
            len(run.attempts) + 1,
            run.status.value,
            *common,
            _number(spec.submit),
            _time(run.start_time),
            _time(run.end_time),
            _time(run.wait),
            len(run.attempts),
            *_where(_final_placement(run), names),
        ]


def _final_placement(run: JobRun) -> list[Binding | None]:
    """Where each pod ran, or is bound (a gang's pods held while it waits, or deadlocked)."""
    return [placed or bound for placed, bound in zip(run.placement, run.bound, strict=True)]


def _where(placement: Sequence[Binding | None], names: Sequence[str]) -> list[str]:
    nodes = dict.fromkeys(names[binding.node] for binding in placement if binding is not None)
    pods = [
        f"{names[binding.node]}[{','.join(map(str, binding.gpus))}]" if binding is not None else "-"
        for binding in placement
    ]
    return [" ".join(nodes), " ".join(pods) if nodes else ""]


def timeline_rows(result: SimResult, seed: int, step: float | None = None) -> Iterator[list[Any]]:
    """The run's step series sampled every `step` seconds from the first sample to the last (inclusive)."""
    timeline = result.timeline
    if not timeline.times:
        return
    times = np.asarray(timeline.times, dtype=np.float64)
    start, end = float(times[0]), float(times[-1])
    span = end - start
    chosen = sample_step(span, step)
    count = math.floor(span / chosen + 1e-9) + 1 if span > 0 else 1
    capacity = result.total_gpus
    for k in range(count):
        at = start + k * chosen
        index = int(np.searchsorted(times, at, side="right")) - 1
        busy, held, stranded = timeline.busy[index], timeline.held[index], timeline.stranded[index]
        free = capacity - held
        yield [
            result.policy,
            seed,
            _number(at),
            _number(busy),
            round(busy / capacity, 6) if capacity else 0.0,
            _number(held),
            _number(free),
            _number(stranded),
            round(stranded / free, 6) if free > 1e-9 else 0.0,
            timeline.queued[index],
        ]


def sample_step(span: float, step: float | None) -> float:
    """The sampling step: `step` if given (refused when the run would need more than MAX_SAMPLES), else span / 1000."""
    if step is None:
        return max(span / DEFAULT_SAMPLES, 1e-9) if span > 0 else 1.0
    if not step > 0:
        raise OutputError(f"step must be positive seconds, got {step}")
    if span / step + 1 > MAX_SAMPLES:
        raise OutputError(
            f"step {step:g} s would write {int(span / step) + 1} samples per run; the limit is {MAX_SAMPLES}"
        )
    return step


def _number(value: float) -> str:
    """Up to six decimals, no trailing zeros: 3600, 0.25, 12.345679."""
    return f"{value:.6f}".rstrip("0").rstrip(".") or "0"


def _time(value: float | None) -> str:
    return "" if value is None else _number(round(value, 6))
