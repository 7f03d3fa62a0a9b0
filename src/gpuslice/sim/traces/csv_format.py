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
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from gpuslice.sim.core.clusters import parse_cluster
from gpuslice.sim.core.model import JobSpec, PodSpec, SimModelError
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
)
REQUIRED = ("job_id", "submit", "duration", "pods", "gpu")
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
    """Read a trace file; errors name the file, the line and the column."""
    source = Path(path)
    try:
        text = source.read_text()
    except OSError as exc:
        raise TraceError(f"cannot read trace {source}: {exc.strerror or exc}") from exc
    return parse_trace(text, str(source), default_name=source.stem)


def parse_trace(text: str, source: str = "<trace>", default_name: str = "trace") -> Trace:
    headers: dict[str, str] = {}
    body: list[tuple[int, str]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith("#"):
            key, sep, value = stripped[1:].partition(":")
            if sep and not body:
                headers[key.strip().lower()] = value.strip()
        elif stripped:
            body.append((number, line))
    if "cluster" not in headers:
        raise TraceError(f"{source}: missing the '# cluster: <spec>' header (e.g. '# cluster: 16xdgx-h100;island=4')")
    version = headers.get("gpuslice-sim-trace", FORMAT_VERSION)
    if version != FORMAT_VERSION:
        raise TraceError(f"{source}: format version {version!r} is not supported (this reader knows {FORMAT_VERSION})")
    try:
        cluster = parse_cluster(headers["cluster"])
    except SimModelError as exc:
        raise TraceError(f"{source}: cluster header: {exc}") from exc
    if not body:
        raise TraceError(f"{source}: no CSV header row and no jobs")
    header_line, header_text = body[0]
    columns = [column.strip() for column in next(csv.reader([header_text]))]
    missing = [column for column in REQUIRED if column not in columns]
    unknown = [column for column in columns if column not in COLUMNS]
    if missing or unknown:
        problem = f"missing column(s) {missing}" if missing else f"unknown column(s) {unknown}"
        raise TraceError(f"{source}:{header_line}: {problem}; columns are {', '.join(COLUMNS)}")
    jobs: dict[str, _PendingJob] = {}
    for number, line in body[1:]:
        values = next(csv.reader([line]))
        if len(values) != len(columns):
            raise TraceError(f"{source}:{number}: {len(values)} values for {len(columns)} columns")
        _add_row(
            jobs, dict(zip(columns, (value.strip() for value in values), strict=True)), f"{source}:{number}", number
        )
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
    )


def _add_row(jobs: dict[str, _PendingJob], row: dict[str, str], where: str, number: int) -> None:
    job_id = row["job_id"]
    if not job_id:
        raise TraceError(f"{where}: job_id: must not be empty")
    submit = _float(row, "submit", where)
    duration = _float(row, "duration", where)
    pods = _int(row, "pods", where)
    if pods < 1:
        raise TraceError(f"{where}: pods: must be at least 1, got {pods}")
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
    writer = csv.writer(stream, lineterminator="\n")
    writer.writerow(COLUMNS)
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
                )
            )


def _text(value: float) -> str:
    """The shortest text that reads back as the same float ('3600', '0.25', '12.345678901234567')."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def trace_to_text(trace: Trace) -> str:
    buffer = io.StringIO()
    write_trace(trace, buffer)
    return buffer.getvalue()
