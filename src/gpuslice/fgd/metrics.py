"""Metrics binned by arrived workload (reference §2 and §3 step 8), per run and across seeds."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from gpuslice.fgd.engine import RunResult
from gpuslice.units import MILLI

FloatArray = npt.NDArray[np.float64]
CURVE_FIELDS = ("allocated_gpu_pct", "unallocated_gpu_pct", "frag_amount_pct", "frag_rate_pct")


@dataclass(frozen=True)
class Curve:
    """Means by integer arrived % (index = arrived %, 0 .. ratio x 100); NaN where no record is near."""

    allocated_gpu_pct: FloatArray
    frag_amount_pct: FloatArray
    frag_rate_pct: FloatArray

    @property
    def unallocated_gpu_pct(self) -> FloatArray:
        return 100.0 - self.allocated_gpu_pct

    def at(self, field: str, arrived_pct: int) -> float:
        values: FloatArray = getattr(self, field)
        return float(values[arrived_pct]) if 0 <= arrived_pct < len(values) else math.nan

    def rows(self) -> list[dict[str, float | int | None]]:
        return [
            {"arrived_pct": b, **{f: _json_number(getattr(self, f)[b]) for f in CURVE_FIELDS}}
            for b in range(len(self.allocated_gpu_pct))
        ]


def _json_number(value: float) -> float | None:
    """Rounded for the JSON records; None (null) where there is no value (e.g. 130 % with --ratio 1.0)."""
    return None if math.isnan(value) else round(float(value), 4)


def bin_means(arrived_pct: npt.NDArray[np.int64], values: FloatArray, bins: int) -> FloatArray:
    """Mean of `values` over the records whose arrived % rounds to each bin; an empty bin takes the
    records within one point of it (the reference's fallback), else NaN."""
    inside = (arrived_pct >= 0) & (arrived_pct < bins)
    counts = np.bincount(arrived_pct[inside], minlength=bins).astype(np.float64)
    sums = np.bincount(arrived_pct[inside], weights=values[inside], minlength=bins)
    near_counts = np.convolve(counts, np.ones(3), mode="same")
    near_sums = np.convolve(sums, np.ones(3), mode="same")
    with np.errstate(invalid="ignore", divide="ignore"):
        exact = sums / counts
        near = near_sums / near_counts
    return np.where(counts > 0, exact, np.where(near_counts > 0, near, np.nan))


def curve_of(result: RunResult) -> Curve:
    capacity = result.total_gpus * MILLI
    bins = round(result.ratio * 100) + 1
    arrived_pct = np.rint(result.arrived_milli * 100.0 / capacity).astype(np.int64)
    allocated = result.allocated_milli.astype(np.float64)
    idle = capacity - allocated
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.where(idle > 0, 100.0 * result.frag_milli / idle, 0.0)
    return Curve(
        allocated_gpu_pct=bin_means(arrived_pct, 100.0 * allocated / capacity, bins),
        frag_amount_pct=bin_means(arrived_pct, 100.0 * result.frag_milli / capacity, bins),
        frag_rate_pct=bin_means(arrived_pct, rate, bins),
    )


def record_of(result: RunResult, curve: Curve | None = None) -> dict[str, Any]:
    """The JSON record of one (workload, policy, seed) run."""
    curve = curve or curve_of(result)
    return {
        "workload": result.workload,
        "policy": result.policy,
        "seed": result.seed,
        "ratio": result.ratio,
        "total_gpus": result.total_gpus,
        "pods": result.pods,
        "clones": result.clones,
        "removed": result.removed,
        "failed_pods": result.failed,
        "unallocated_gpu_pct_at_100": _json_number(curve.at("unallocated_gpu_pct", 100)),
        "unallocated_gpu_pct_at_130": _json_number(curve.at("unallocated_gpu_pct", 130)),
        "frag_amount_pct_at_100": _json_number(curve.at("frag_amount_pct", 100)),
        "frag_rate_pct_at_90": _json_number(curve.at("frag_rate_pct", 90)),
        "placement_seconds": round(result.placement_seconds, 4),
        "curve": curve.rows(),
    }


def curve_value(record: dict[str, Any], field: str, arrived_pct: int) -> float:
    rows = record["curve"]
    if 0 <= arrived_pct < len(rows):
        value = rows[arrived_pct].get(field)
        return math.nan if value is None else float(value)
    return math.nan


@dataclass(frozen=True)
class Stat:
    mean: float
    sd: float
    low: float
    high: float
    n: int


def stat(values: Iterable[float]) -> Stat:
    """Mean and *sample* standard deviation (n - 1), as the paper reports; NaNs are dropped."""
    data = [v for v in values if not math.isnan(v)]
    if not data:
        return Stat(math.nan, math.nan, math.nan, math.nan, 0)
    mean = sum(data) / len(data)
    sd = math.sqrt(sum((v - mean) ** 2 for v in data) / (len(data) - 1)) if len(data) > 1 else 0.0
    return Stat(mean, sd, min(data), max(data), len(data))


def seed_stat(records: Sequence[dict[str, Any]], field: str, arrived_pct: int) -> Stat:
    return stat(curve_value(r, field, arrived_pct) for r in records)


def first_shortfall(records: Sequence[dict[str, Any]], points: float = 1.0) -> int | None:
    """First arrived % at which the mean allocation falls more than `points` below arrived demand."""
    if not records:
        return None
    for b in range(len(records[0]["curve"])):
        mean = seed_stat(records, "allocated_gpu_pct", b).mean
        if not math.isnan(mean) and mean < b - points:
            return b
    return None
