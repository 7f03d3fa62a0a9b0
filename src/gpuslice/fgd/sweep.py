"""Many openb runs (workloads x policies x seeds), optionally over worker processes or a Dask cluster."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from gpuslice.executors import run_all
from gpuslice.fgd.engine import Workload, simulate
from gpuslice.fgd.metrics import record_of, seed_stat
from gpuslice.fgd.policies import FACTORIES, canonical_openb_policy
from gpuslice.fgd.protocol import DEFAULT_RATIO
from gpuslice.fgd.replay import PodTimes, ReplayResult, load_pod_times, replay
from gpuslice.fgd.trace import load_trace, resolve_trace_dir

_WORKLOADS: dict[tuple[str, str], Workload] = {}
_TIMES: dict[tuple[str, str], PodTimes] = {}
_Item = TypeVar("_Item")
_Result = TypeVar("_Result")


def parse_seeds(text: str) -> list[int]:
    """'42-51', '42,44,50-51' or '7' -> the seeds, in order, without repeats."""
    seeds: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        low, sep, high = part.partition("-")
        try:
            values = range(int(low), int(high) + 1) if sep else range(int(low), int(low) + 1)
        except ValueError:
            raise ValueError(f"seeds {text!r}: {part!r} is not N or N-M") from None
        if not values:
            raise ValueError(f"seeds {text!r}: empty range {part!r}")
        seeds.extend(s for s in values if s not in seeds)
    if not seeds:
        raise ValueError(f"seeds {text!r}: no seed given")
    return seeds


def parse_names(text: str, known: Sequence[str], what: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise ValueError(f"{what} {text!r}: unknown {', '.join(unknown) or '(none given)'} (known: {', '.join(known)})")
    return list(dict.fromkeys(names))


def parse_policies(text: str) -> list[str]:
    """Policy names in their one spelling (`bestfit` is read as `best-fit`)."""
    names = ",".join(canonical_openb_policy(name.strip()) for name in text.split(","))
    return parse_names(names, list(FACTORIES), "policies")


def workload(name: str, trace_dir: Path) -> Workload:
    """Loaded once per process (workers forked after loading inherit it)."""
    key = (str(trace_dir), name)
    if key not in _WORKLOADS:
        _WORKLOADS[key] = Workload.from_trace(load_trace(name, trace_dir))
    return _WORKLOADS[key]


@dataclass(frozen=True)
class Job:
    workload: str
    policy: str
    seed: int
    ratio: float
    trace_dir: Path
    policy_refs: tuple[str, ...] = ()  # user policies, registered again in a worker that lacks them (Dask)


def run_job(job: Job) -> dict[str, Any]:
    _register(job.policy, job.policy_refs)
    return record_of(simulate(workload(job.workload, job.trace_dir), job.policy, job.seed, job.ratio))


def run_sweep(
    workloads: Sequence[str],
    policies: Sequence[str],
    seeds: Sequence[int],
    *,
    ratio: float = DEFAULT_RATIO,
    trace_dir: str | Path | None = None,
    jobs: int = 1,
    progress: Callable[[dict[str, Any]], None] | None = None,
    executor: Executor | None = None,
    policy_refs: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """One JSON-ready record per (workload, policy, seed), in that order: here, over a local pool of `jobs`
    processes, or on `executor` (a Dask cluster's); the records are the same whichever runs them."""
    folder = resolve_trace_dir(trace_dir)
    for name in workloads:
        workload(name, folder)  # load (and fail on a missing file) before any worker starts
    refs = tuple(policy_refs)
    todo = [Job(w, p, s, ratio, folder, refs) for w in workloads for p in policies for s in seeds]
    # the longest runs (FGD) go first to balance the workers
    ranked = sorted(range(len(todo)), key=lambda i: not todo[i].policy.startswith("fgd"))
    return execute(run_job, todo, ranked, jobs, executor, progress)


def execute(
    function: Callable[[_Item], _Result],
    todo: Sequence[_Item],
    ranked: Sequence[int],
    jobs: int,
    executor: Executor | None,
    progress: Callable[[_Result], None] | None,
) -> list[_Result]:
    """function over todo: on `executor` when given, else in this process (jobs 1) or a forked pool of `jobs`
    processes (workers inherit the loaded traces); results in todo order, progress in `ranked` order."""
    if executor is not None:
        return run_all(executor, function, todo, ranked, progress)
    if jobs <= 1 or len(todo) <= 1:
        results = []
        for item in todo:
            results.append(function(item))
            if progress:
                progress(results[-1])
        return results
    import multiprocessing  # a pool only for -j > 1: a single run starts without the process machinery
    from concurrent.futures import ProcessPoolExecutor

    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(max_workers=min(jobs, len(todo)), mp_context=context) as pool:
        return run_all(pool, function, todo, ranked, progress)


@dataclass(frozen=True)
class ReplayJob:
    workload: str
    policy: str
    seed: int
    compress: float
    node_fraction: float
    trace_dir: Path
    policy_refs: tuple[str, ...] = ()


def run_replay_job(job: ReplayJob) -> ReplayResult:
    _register(job.policy, job.policy_refs)
    loaded = workload(job.workload, job.trace_dir)
    key = (str(job.trace_dir), job.workload)
    if key not in _TIMES:
        _TIMES[key] = load_pod_times(loaded)
    return replay(loaded, job.policy, job.seed, _TIMES[key], job.compress, job.node_fraction)


def _register(policy: str, references: Sequence[str]) -> None:
    """A user policy registered in the parent is missing in a fresh worker (Dask): register it there too."""
    if policy not in FACTORIES and references:
        from gpuslice.fgd.policies.loader import register_openb_policy

        for reference in references:
            register_openb_policy(reference, FACTORIES)


def _pct(value: float | None) -> str:
    return "     —" if value is None else f"{value:6.2f}"


def progress_line(record: dict[str, Any]) -> str:
    return (
        f"  {record['workload']:<12} {record['policy']:<10} seed {record['seed']:<4} unallocated "
        f"{_pct(record['unallocated_gpu_pct_at_100'])} % @100 {_pct(record['unallocated_gpu_pct_at_130'])} % @130"
        f"  ({record['placement_seconds']:.2f} s)"
    )


def summary_lines(records: Sequence[dict[str, Any]]) -> list[str]:
    """Plain-text table: mean ± sd of unallocated GPU % per (workload, policy), and seconds per run."""
    lines = [f"{'workload':<12} {'policy':<10} {'seeds':>5} {'unalloc@100 %':>15} {'unalloc@130 %':>15} {'s/run':>6}"]
    for workload, policy in dict.fromkeys((r["workload"], r["policy"]) for r in records):
        runs = [r for r in records if r["workload"] == workload and r["policy"] == policy]
        a, b = seed_stat(runs, "unallocated_gpu_pct", 100), seed_stat(runs, "unallocated_gpu_pct", 130)
        seconds = sum(r["placement_seconds"] for r in runs) / len(runs)
        cells = [f"{s.mean:8.2f} ± {s.sd:4.2f}" if s.n else f"{'—':>15}" for s in (a, b)]
        lines.append(f"{workload:<12} {policy:<10} {len(runs):>5} {cells[0]} {cells[1]} {seconds:6.2f}")
    return lines
