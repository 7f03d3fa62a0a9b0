"""Helpers shared by the extension traces (preemption, tenants, topology, sharing): parameters and draws."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from gpuslice.sim.traces.trace import TraceError

Number = int | float


def read_params(trace: str, params: Mapping[str, str], defaults: Mapping[str, Number | str]) -> dict[str, Number | str]:
    """`defaults` overridden by `params`, each converted to its default's type; errors name the trace and key."""
    unknown = sorted(set(params) - set(defaults))
    if unknown:
        raise TraceError(f"{trace}: unknown parameter(s) {unknown}; known: {', '.join(defaults)}")
    values: dict[str, Number | str] = dict(defaults)
    for key, text in params.items():
        default = defaults[key]
        try:
            values[key] = int(text) if isinstance(default, int) else float(text) if isinstance(default, float) else text
        except ValueError:
            raise TraceError(f"{trace}: {key} must be a number, got {text!r}") from None
        if isinstance(values[key], int | float) and not values[key] >= 0:  # type: ignore[operator]
            raise TraceError(f"{trace}: {key} must not be negative, got {text!r}")
    return values


def log_uniform(rng: np.random.Generator, low: float, high: float, size: int) -> npt.NDArray[np.float64]:
    """Durations spread evenly on a log scale between low and high seconds."""
    return np.exp(rng.uniform(math.log(low), math.log(high), size=size))


def log_uniform_mean(low: float, high: float) -> float:
    return (high - low) / math.log(high / low)


def poisson_times(rng: np.random.Generator, rate: float, count: int, start: float = 0.0) -> npt.NDArray[np.float64]:
    """`count` arrival times of a Poisson process of `rate` per second, from `start`, rounded to milliseconds."""
    return np.round(start + np.cumsum(rng.exponential(1.0 / rate, size=count)), 3)
