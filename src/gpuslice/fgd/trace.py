"""Load the Alibaba openb node and pod lists (cluster-trace-gpu-v2023) into compact, name-sorted tables."""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

import numpy as np
import numpy.typing as npt

from gpuslice.fsutil.textread import InputFileError, iter_text_lines
from gpuslice.units import MILLI

ENV_TRACE_DIR = "GPUSLICE_OPENB_DIR"
DEFAULT_RELATIVE_DIR = Path("..") / "shared" / "traces" / "openb"
NODE_FILE = "openb_node_list_gpu_node.csv"
POD_PREFIX = "openb_pod_list_"
NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
# Limits (docs/security.md): openb has 1,523 nodes and about 8,000 pods per workload; a row costs well
# under 1 KiB here, so the caps stay far inside a 24 GiB machine. No column (milli-CPU, MiB, milli-GPU)
# comes near MAX_VALUE, and the int64 tables would overflow long after it.
MAX_NODES = 100_000
MAX_PODS = 1_000_000
MAX_OPENB_LINE_BYTES = 64 * 1024
MAX_VALUE = 10**12

IntArray = npt.NDArray[np.int64]


class OpenbTraceError(ValueError):
    """The trace folder or one of its files is missing or malformed (the message names the file and why)."""


@dataclass(frozen=True)
class NodeTable:
    """GPU nodes sorted by name; `model` indexes `models` (-1 for a node without GPUs)."""

    names: tuple[str, ...]
    cpu: IntArray
    memory: IntArray
    gpus: IntArray
    model: IntArray
    models: tuple[str, ...]

    @property
    def total_gpus(self) -> int:
        return int(self.gpus.sum())


@dataclass(frozen=True)
class PodTable:
    """Pods sorted by name. `gpu_milli` is per GPU; `spec` is the raw `gpu_spec` ('' = any model)."""

    names: tuple[str, ...]
    cpu: IntArray
    memory: IntArray
    num_gpu: IntArray
    gpu_milli: IntArray
    spec: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.names)

    @property
    def gpu_request(self) -> IntArray:
        """Total milli-GPU each pod requests."""
        return self.num_gpu * self.gpu_milli


@dataclass(frozen=True)
class OpenbTrace:
    workload: str
    nodes: NodeTable
    pods: PodTable
    source: Path


def project_root() -> Path:
    """The project root: the folder above `src/` (this file is src/gpuslice/fgd/trace.py)."""
    return Path(__file__).resolve().parents[3]


def resolve_trace_dir(explicit: str | Path | None = None) -> Path:
    """`explicit`, else $GPUSLICE_OPENB_DIR, else ../shared/traces/openb beside the project root; must exist."""
    if explicit is not None and str(explicit) != "":
        path, origin = Path(explicit), "--trace-dir"
    elif os.environ.get(ENV_TRACE_DIR):
        path, origin = Path(os.environ[ENV_TRACE_DIR]), f"${ENV_TRACE_DIR}"
    else:
        path, origin = (project_root() / DEFAULT_RELATIVE_DIR).resolve(), "the default (../shared/traces/openb)"
    if not path.is_dir():
        raise OpenbTraceError(
            f"openb trace folder {path} (from {origin}) does not exist; "
            f"pass --trace-dir DIR or set {ENV_TRACE_DIR} to the folder holding {NODE_FILE}"
        )
    return path


def list_workloads(trace_dir: Path) -> list[str]:
    """Workload names available in the folder: `default`, `cpu050`, `gpushare40`, ..."""
    names = sorted(p.name[len(POD_PREFIX) : -len(".csv")] for p in trace_dir.glob(f"{POD_PREFIX}*.csv"))
    return sorted(names, key=lambda n: (n != "default", n))


def load_trace(workload: str = "default", trace_dir: str | Path | None = None) -> OpenbTrace:
    folder = resolve_trace_dir(trace_dir)
    nodes = load_nodes(folder / NODE_FILE)
    pod_file = folder / f"{POD_PREFIX}{workload}.csv"
    if not pod_file.is_file():
        known = ", ".join(list_workloads(folder)) or "none"
        raise OpenbTraceError(f"workload {workload!r}: {pod_file} does not exist (available: {known})")
    return OpenbTrace(workload=workload, nodes=nodes, pods=load_pods(pod_file), source=folder)


def _rows(path: Path, required: tuple[str, ...], limit: int) -> list[tuple[int, dict[str, str]]]:
    """(line, row) of a CSV file with these columns, streamed and checked (UTF-8, line length, row count)."""
    if not path.is_file():
        raise OpenbTraceError(f"{path} does not exist")
    lines = iter_text_lines(path, "openb trace", MAX_OPENB_LINE_BYTES)
    rows: list[tuple[int, dict[str, str]]] = []
    number = 1
    try:
        reader = csv.DictReader((text for _, text in lines), restval="")
        missing = [c for c in required if c not in (reader.fieldnames or ())]
        if missing:
            raise OpenbTraceError(f"{path}: missing column(s) {', '.join(missing)} (header: {reader.fieldnames})")
        for number, row in enumerate(reader, start=2):
            if len(rows) == limit:
                raise OpenbTraceError(f"{path.name}:{number}: more than {limit} rows, the limit of this file")
            rows.append((number, row))
    except InputFileError as exc:
        raise OpenbTraceError(str(exc)) from exc
    except csv.Error as exc:
        raise OpenbTraceError(f"{path.name}:{number + 1}: not CSV: {exc}") from exc
    return rows


def _int(path: Path, line: int, row: dict[str, str], column: str) -> int:
    text = (row.get(column) or "").strip()
    try:
        value = int(text)
    except ValueError:
        raise OpenbTraceError(f"{path.name}:{line}: column {column} = {text!r} is not an integer") from None
    if value < 0:
        raise OpenbTraceError(f"{path.name}:{line}: column {column} = {value} is negative")
    if value > MAX_VALUE:
        raise OpenbTraceError(f"{path.name}:{line}: column {column} = {value} is over the limit of {MAX_VALUE}")
    return value


def load_nodes(path: Path) -> NodeTable:
    rows = sorted(_rows(path, NODE_COLUMNS, MAX_NODES), key=lambda item: item[1]["sn"])
    if not rows:
        raise OpenbTraceError(f"{path}: no nodes")
    models = sorted({row["model"].strip() for _, row in rows if row["model"].strip()})
    index = {name: i for i, name in enumerate(models)}
    names, cpu, memory, gpus, model = [], [], [], [], []
    for line, row in rows:
        count = _int(path, line, row, "gpu")
        name = row["model"].strip()
        if count > 0 and not name:
            raise OpenbTraceError(f"{path.name}:{line}: node {row['sn']} has {count} GPUs but no model")
        names.append(row["sn"])
        cpu.append(_int(path, line, row, "cpu_milli"))
        memory.append(_int(path, line, row, "memory_mib"))
        gpus.append(count)
        model.append(index[name] if name else -1)
    if len(set(names)) != len(names):
        raise OpenbTraceError(f"{path}: duplicate node names")
    return NodeTable(
        names=tuple(names),
        cpu=np.array(cpu, dtype=np.int64),
        memory=np.array(memory, dtype=np.int64),
        gpus=np.array(gpus, dtype=np.int64),
        model=np.array(model, dtype=np.int64),
        models=tuple(models),
    )


def load_pods(path: Path) -> PodTable:
    plain = _load_plain_pods(path)
    if plain is not None:
        return plain
    rows = sorted(_rows(path, POD_COLUMNS, MAX_PODS), key=lambda item: item[1]["name"])
    if not rows:
        raise OpenbTraceError(f"{path}: no pods")
    names, cpu, memory, num_gpu, gpu_milli, spec = [], [], [], [], [], []
    for line, row in rows:
        count = _int(path, line, row, "num_gpu")
        milli = _int(path, line, row, "gpu_milli")
        where = f"{path.name}:{line}: pod {row['name']}"
        if milli > MILLI:
            raise OpenbTraceError(f"{where}: gpu_milli {milli} is above {MILLI} (it is per GPU)")
        if (count == 0) != (milli == 0):
            raise OpenbTraceError(f"{where}: num_gpu {count} and gpu_milli {milli} disagree (both zero or neither)")
        if 0 < milli < MILLI and count != 1:
            raise OpenbTraceError(f"{where}: a fractional GPU share ({milli} milli) needs num_gpu 1, not {count}")
        names.append(row["name"])
        cpu.append(_int(path, line, row, "cpu_milli"))
        memory.append(_int(path, line, row, "memory_mib"))
        num_gpu.append(count)
        gpu_milli.append(milli)
        spec.append((row.get("gpu_spec") or "").strip())
    if len(set(names)) != len(names):
        raise OpenbTraceError(f"{path}: duplicate pod names")
    return PodTable(
        names=tuple(names),
        cpu=np.array(cpu, dtype=np.int64),
        memory=np.array(memory, dtype=np.int64),
        num_gpu=np.array(num_gpu, dtype=np.int64),
        gpu_milli=np.array(gpu_milli, dtype=np.int64),
        spec=tuple(spec),
    )


def spec_mask(spec: str, models: tuple[str, ...]) -> int:
    """Bit i set when model i is allowed; '' allows every model. Unknown names simply match no node."""
    if not spec:
        return (1 << len(models)) - 1
    allowed = {part.strip() for part in spec.split("|") if part.strip()}
    return sum(1 << i for i, name in enumerate(models) if name in allowed)


def _load_plain_pods(path: Path) -> PodTable | None:
    """The pod table of a file every row of which is plain (what openb ships), in one pass of bulk
    conversions and vectorised checks; None for anything else, which `load_pods`' row-by-row reading then
    accepts or rejects naming the line. Rule: this path accepts only what that one accepts, with equal
    results, so every check there has its counterpart here (a test compares both on good and bad files)."""
    try:
        reader = csv.reader(text for _, text in iter_text_lines(path, "openb trace", MAX_OPENB_LINE_BYTES))
        header = next(reader, None)
        if header is None or len(set(header)) != len(header) or any(c not in header for c in POD_COLUMNS):
            return None
        # blank lines skipped as the row-by-row reader does; one row past the limit is enough to refuse
        rows = list(islice(filter(None, reader), MAX_PODS + 1))
        if not rows or len(rows) > MAX_PODS or any(len(row) != len(header) for row in rows):
            return None
        name_at, spec_at = header.index("name"), header.index("gpu_spec") if "gpu_spec" in header else -1
        names = [row[name_at] for row in rows]
        order = sorted(range(len(rows)), key=names.__getitem__)
        columns: dict[str, IntArray] = {}
        for column in POD_COLUMNS[1:]:
            at = header.index(column)
            columns[column] = np.array([int(row[at]) for row in rows], dtype=np.int64)[order]
    except (OSError, InputFileError, csv.Error, ValueError, OverflowError):
        return None
    count, milli = columns["num_gpu"], columns["gpu_milli"]
    values = np.stack(list(columns.values()))
    if (
        (values < 0).any()
        or (values > MAX_VALUE).any()
        or (milli > MILLI).any()
        or ((count == 0) != (milli == 0)).any()
        or ((milli > 0) & (milli < MILLI) & (count != 1)).any()
        or len(set(names)) != len(names)
    ):
        return None
    return PodTable(
        names=tuple(names[i] for i in order),
        cpu=columns["cpu_milli"],
        memory=columns["memory_mib"],
        num_gpu=count,
        gpu_milli=milli,
        spec=tuple(rows[i][spec_at].strip() for i in order) if spec_at >= 0 else ("",) * len(rows),
    )
