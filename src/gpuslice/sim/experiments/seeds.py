"""Several seeds of one comparison: the seed list syntax, the runs, and each figure's mean and standard deviation."""

from __future__ import annotations

import math
from collections.abc import Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

from gpuslice.executors import run_all
from gpuslice.sim.core.engine import SimConfig
from gpuslice.sim.experiments.compare import Comparison, ComparisonProgress, compare
from gpuslice.sim.traces import resolve_trace

MAX_SEEDS = 1000


class SeedError(ValueError):
    """A seed list that cannot be read; the message quotes it."""


def parse_seeds(text: str) -> list[int]:
    """`7`, `0-4` (inclusive) or `1,3,9-11`: distinct seeds in the order written, at most MAX_SEEDS."""
    seeds: list[int] = []
    for part in (piece.strip() for piece in text.split(",")):
        if not part:
            continue
        low, dash, high = part.partition("-")
        try:
            first, last = (int(low), int(high)) if dash else (int(part), int(part))
        except ValueError:
            raise SeedError(f"seeds {text!r}: {part!r} is not a seed or a range like 0-4") from None
        if first < 0 or last < first:
            raise SeedError(f"seeds {text!r}: {part!r} must be a non-negative seed or a rising range")
        if len(seeds) + last - first + 1 > MAX_SEEDS:
            raise SeedError(f"seeds {text!r}: more than {MAX_SEEDS} seeds")
        seeds.extend(seed for seed in range(first, last + 1) if seed not in seeds)
    if not seeds:
        raise SeedError(f"seeds {text!r}: no seed given")
    return seeds


@dataclass(frozen=True)
class Spread:
    """Mean and sample standard deviation (n - 1 in the denominator; 0 for one value) of one figure."""

    mean: float
    sd: float
    count: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        count = len(values)
        mean = sum(values) / count if count else 0.0
        variance = sum((value - mean) ** 2 for value in values) / (count - 1) if count > 1 else 0.0
        return cls(mean, math.sqrt(variance), count)


@dataclass
class SeedSweep:
    """The same comparison once per seed (seed order as given); one seed gives the plain comparison."""

    comparisons: list[Comparison]

    @property
    def seeds(self) -> list[int]:
        return [comparison.seed for comparison in self.comparisons]

    @property
    def first(self) -> Comparison:
        return self.comparisons[0]

    def policies(self) -> list[str]:
        return [result.policy for result in self.first.results]

    def to_json(self) -> dict[str, Any]:
        """One seed: the comparison's JSON. Several: every run's JSON, and mean and sd of each numeric figure."""
        if len(self.comparisons) == 1:
            return self.first.to_json()
        runs = [comparison.to_json() for comparison in self.comparisons]
        aggregate = []
        for position, policy in enumerate(self.policies()):
            records = [run["results"][position] for run in runs]
            entry: dict[str, Any] = {"policy": policy}
            for key, value in records[0].items():
                if isinstance(value, bool) or not isinstance(value, int | float):
                    continue
                spread = Spread.of([float(record[key]) for record in records])
                entry[key] = {"mean": round(spread.mean, 6), "sd": round(spread.sd, 6)}
            aggregate.append(entry)
        base = runs[0]
        return {
            "trace": base["trace"],
            "cluster": base["cluster"],
            "gpus": base["gpus"],
            "seeds": self.seeds,
            "queue_order": base["queue_order"],
            "cross_island_penalty": base["cross_island_penalty"],
            "mean_sd": aggregate,
            "runs": runs,
        }


@dataclass(frozen=True)
class SeedJob:
    """One seed of a sweep, as a worker (a Dask one included) needs it: user policies travel as references."""

    trace_ref: str
    policies: tuple[str, ...]
    seed: int
    cross_island_penalty: float
    order: str
    policy_refs: tuple[str, ...] = ()


def run_seed(job: SeedJob, progress: ComparisonProgress | None = None) -> Comparison:
    """Build the trace and compare the policies for one seed (the seed drives both the trace and the engine)."""
    if job.policy_refs:  # registered in the parent already; again (the same class: a no-op) in a fresh worker
        from gpuslice.sim.experiments.variants import add_user_policy

        for reference in job.policy_refs:
            add_user_policy(reference)
    trace = resolve_trace(job.trace_ref, job.seed)
    config = SimConfig(cross_island_penalty=job.cross_island_penalty, seed=job.seed)
    return compare(trace, job.policies, config, job.order, progress)


def run_seeds(
    trace_ref: str,
    policies: Sequence[str],
    seeds: Sequence[int],
    cross_island_penalty: float = SimConfig.cross_island_penalty,
    order: str = "priority",
    progress: ComparisonProgress | None = None,
    executor: Executor | None = None,
    policy_refs: Sequence[str] = (),
) -> SeedSweep:
    """One comparison per seed, here (with progress) or on `executor` (a Dask cluster's): the same results."""
    jobs = [
        SeedJob(trace_ref, tuple(policies), seed, cross_island_penalty, order, tuple(policy_refs)) for seed in seeds
    ]
    if executor is not None:
        return SeedSweep(run_all(executor, run_seed, jobs))
    return SeedSweep([run_seed(job, progress) for job in jobs])
