"""The trace file format: `# key: value` header lines, then CSV rows of pod groups (see docs/simulator.md).

    # gpuslice-sim-trace: 1
    # name: my-trace
    # cluster: 16xdgx-h100;island=4
    job_id,submit,duration,pods,gpu,cpu_milli,memory_mib,priority,tenant,gang,gpu_model
    train-1,0,3600,2,8,112000,1048576,0,team-a,true,
    notebook-7,30,600,1,0.25,2000,16384,0,team-b,false,H100

One row is `pods` identical pods of job `job_id`; more rows with the same job_id add pods of another
shape to that job (their job-level columns must agree). Required columns: job_id, submit, duration,
pods, gpu. The others default to cpu_milli 1000, memory_mib 1024, priority 0, tenant "default",
gang false, gpu_model empty (any model). Times are seconds; `gpu` is GPUs per pod (0.5 = half a GPU).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from gpuslice.fsutil.textread import InputFileError, iter_text_lines
from gpuslice.sim.core.clusters import parse_cluster
from gpuslice.sim.core.model import ClusterSpec, JobSpec, PodSpec, SimModelError
from gpuslice.sim.traces.csv_physics import PHYSICS_COLUMNS, PhysicsColumns, physics_cells, physics_columns
from gpuslice.sim.traces.trace import Trace, TraceError

FORMAT_VERSION = "1"
COLUMNS = (
    "job_id",
    "submit",
    "duration",
    "pods",
    "gpu",
    "cpu_milli",
    "memory_mib",
    "priority",
    "tenant",
    "gang",
    "gpu_model",
    *PHYSICS_COLUMNS,
)
REQUIRED = ("job_id", "submit", "duration", "pods", "gpu")
# Limits (docs/security.md). Measured: a parsed job costs ~0.6 KiB and a simulated one ~1 KiB per
# policy, so a million rows and four million pods stay a few GiB, well inside a 24 GiB machine.
MAX_TRACE_ROWS = 1_000_000
MAX_TRACE_PODS = 4_000_000
MAX_TRACE_LINE_BYTES = 64 * 1024
# Ten years: longer submit times or durations are typing mistakes (or 1e300), and would print as inf.
MAX_TRACE_SECONDS = 10 * 365 * 86_400
_TRUE = {"true", "1", "yes"}
_FALSE = {"false", "0", "no", ""}


@dataclass
class _PendingJob:
    line: int
    submit: float
    duration: float
    priority: int
    tenant: str
    gang: bool
    pods: list[PodSpec] = field(default_factory=list)


def load_trace(path: str | Path) -> Trace:
    """Read a trace file, streamed line by line; errors name the file, the line and the column."""
    source = Path(path)
    try:
        return _parse_lines(iter_text_lines(source, "trace", MAX_TRACE_LINE_BYTES), str(source), source.stem)
    except OSError as exc:
        raise TraceError(f"cannot read trace {source}: {exc.strerror or exc}") from exc
    except InputFileError as exc:
        raise TraceError(str(exc)) from exc


def parse_trace(text: str, source: str = "<trace>", default_name: str = "trace") -> Trace:
    return _parse_lines(enumerate(text.splitlines(), start=1), source, default_name)


def _parse_lines(lines: Iterable[tuple[int, str]], source: str, default_name: str) -> Trace:
    headers: dict[str, str] = {}
    cluster: ClusterSpec | None = None
    columns: list[str] | None = None
    jobs: dict[str, _PendingJob] = {}
    physics: PhysicsColumns | None = None
    rows = 0
    pods = [0]  # every pod so far, against MAX_TRACE_PODS
    for number, line in lines:
        stripped = line.strip()
        if stripped.startswith("#"):
            key, sep, value = stripped[1:].partition(":")
            if sep and cluster is None:
                headers[key.strip().lower()] = value.strip()
            continue
        if not stripped:
            continue
        if cluster is None:  # the first body line: every header has been read
            cluster = _cluster(headers, source)
        if columns is None:
            columns = _columns(line, source, number)
            physics = PhysicsColumns(columns)
            continue
        rows += 1
        if rows > MAX_TRACE_ROWS:
            raise TraceError(f"{source}:{number}: more than {MAX_TRACE_ROWS} rows, the limit of a trace")
        values = _csv_values(line, f"{source}:{number}")
        if len(values) != len(columns):
            raise TraceError(f"{source}:{number}: {len(values)} values for {len(columns)} columns")
        row = dict(zip(columns, (value.strip() for value in values), strict=True))
        _add_row(jobs, row, f"{source}:{number}", number, pods)
        if physics is not None and physics.present:
            physics.add(row, row["job_id"], row.get("tenant") or "default", f"{source}:{number}", number)
    if cluster is None:
        cluster = _cluster(headers, source)
    if columns is None or physics is None:
        raise TraceError(f"{source}: no CSV header row and no jobs")
    try:
        specs = tuple(
            JobSpec(job_id, job.submit, job.duration, tuple(job.pods), job.priority, job.tenant, job.gang)
            for job_id, job in jobs.items()
        )
    except SimModelError as exc:
        raise TraceError(f"{source}: {exc}") from exc
    return Trace(
        name=headers.get("name", default_name),
        cluster=cluster,
        jobs=specs,
        description=headers.get("description", ""),
        cluster_text=headers["cluster"],
        physics=physics.physics(headers, source),
    )


def _cluster(headers: dict[str, str], source: str) -> ClusterSpec:
    if "cluster" not in headers:
        raise TraceError(f"{source}: missing the '# cluster: <spec>' header (e.g. '# cluster: 16xdgx-h100;island=4')")
    version = headers.get("gpuslice-sim-trace", FORMAT_VERSION)
    if version != FORMAT_VERSION:
        raise TraceError(f"{source}: format version {version!r} is not supported (this reader knows {FORMAT_VERSION})")
    try:
        return parse_cluster(headers["cluster"])
    except SimModelError as exc:
        raise TraceError(f"{source}: cluster header: {exc}") from exc


def _columns(header_text: str, source: str, header_line: int) -> list[str]:
    columns = [column.strip() for column in _csv_values(header_text, f"{source}:{header_line}")]
    missing = [column for column in REQUIRED if column not in columns]
    unknown = [column for column in columns if column not in COLUMNS]
    if missing or unknown:
        problem = f"missing column(s) {missing}" if missing else f"unknown column(s) {unknown}"
        raise TraceError(f"{source}:{header_line}: {problem}; columns are {', '.join(COLUMNS)}")
    return columns


def _add_row(jobs: dict[str, _PendingJob], row: dict[str, str], where: str, number: int, total: list[int]) -> None:
    job_id = row["job_id"]
    if not job_id:
        raise TraceError(f"{where}: job_id: must not be empty")
    submit = _seconds(row, "submit", where)
    duration = _seconds(row, "duration", where)
    pods = _int(row, "pods", where)
    if pods < 1:
        raise TraceError(f"{where}: pods: must be at least 1, got {pods}")
    total[0] += pods
    if total[0] > MAX_TRACE_PODS:  # checked before the pods are made: the count alone could fill memory
        raise TraceError(f"{where}: pods: {total[0]} pods in the trace so far, over the limit of {MAX_TRACE_PODS}")
    gang_text = row.get("gang", "").lower()
    if gang_text not in _TRUE | _FALSE:
        raise TraceError(f"{where}: gang: must be true or false, got {row['gang']!r}")
    priority = _int(row, "priority", where, default=0)
    tenant = row.get("tenant") or "default"
    try:
        pod = PodSpec.of(
            _float(row, "gpu", where),
            cpu_milli=_int(row, "cpu_milli", where, default=1000),
            memory_mib=_int(row, "memory_mib", where, default=1024),
            gpu_model=row.get("gpu_model") or None,
        )
    except SimModelError as exc:
        raise TraceError(f"{where}: {exc}") from exc
    job = jobs.get(job_id)
    if job is None:
        job = jobs[job_id] = _PendingJob(number, submit, duration, priority, tenant, gang_text in _TRUE)
    elif (job.submit, job.duration, job.priority, job.tenant, job.gang) != (
        submit,
        duration,
        priority,
        tenant,
        gang_text in _TRUE,
    ):
        raise TraceError(f"{where}: job {job_id!r} already began on line {job.line} with other job-level values")
    job.pods.extend([pod] * pods)


def _float(row: dict[str, str], column: str, where: str) -> float:
    try:
        return float(row.get(column, ""))
    except ValueError:
        raise TraceError(f"{where}: {column}: not a number: {row.get(column, '')!r}") from None


def _csv_values(line: str, where: str) -> list[str]:
    try:
        return next(csv.reader([line]))
    except csv.Error as exc:  # a lone carriage return inside a line, say
        raise TraceError(f"{where}: not CSV: {exc}") from exc


def _seconds(row: dict[str, str], column: str, where: str) -> float:
    value = _float(row, column, where)
    if not math.isfinite(value) or abs(value) > MAX_TRACE_SECONDS:
        raise TraceError(
            f"{where}: {column}: {row.get(column, '')!r} is not a time the simulator can use "
            f"(finite, at most {MAX_TRACE_SECONDS:.0f} s = 10 years)"
        )
    return value


def _int(row: dict[str, str], column: str, where: str, default: int | None = None) -> int:
    text = row.get(column, "")
    if text == "" and default is not None:
        return default
    try:
        return int(text)
    except ValueError:
        raise TraceError(f"{where}: {column}: not a whole number: {text!r}") from None


def write_trace(trace: Trace, stream: TextIO) -> None:
    """Write `trace` in the format above (consecutive identical pods of a job share one row)."""
    stream.write(f"# gpuslice-sim-trace: {FORMAT_VERSION}\n# name: {trace.name}\n")
    stream.write(f"# cluster: {trace.cluster_text or trace.cluster.description}\n")
    if trace.description:
        stream.write(f"# description: {' '.join(trace.description.split())}\n")
    costs = trace.physics.checkpoints
    if costs is not None:
        stream.write(f"# checkpoint_save: {_text(costs.save)}\n# checkpoint_restore: {_text(costs.restore)}\n")
    extra = physics_columns(trace)
    writer = csv.writer(stream, lineterminator="\n")
    writer.writerow((*COLUMNS[: COLUMNS.index(PHYSICS_COLUMNS[0])], *extra))
    for job in trace.jobs:
        groups: list[tuple[PodSpec, int]] = []
        for pod in job.pods:
            if groups and groups[-1][0] == pod:
                groups[-1] = (pod, groups[-1][1] + 1)
            else:
                groups.append((pod, 1))
        for pod, count in groups:
            writer.writerow(
                (
                    job.job_id,
                    _text(job.submit),
                    _text(job.duration),
                    count,
                    _text(pod.gpus),
                    pod.cpu_milli,
                    pod.memory_mib,
                    job.priority,
                    job.tenant,
                    str(job.gang).lower(),
                    pod.gpu_model or "",
                    *physics_cells(trace, job.job_id, job.tenant, extra),
                )
            )


def _text(value: float) -> str:
    """The shortest text that reads back as the same float ('3600', '0.25', '12.345678901234567')."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def trace_to_text(trace: Trace) -> str:
    buffer = io.StringIO()
    write_trace(trace, buffer)
    return buffer.getvalue()
