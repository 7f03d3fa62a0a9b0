"""Fixtures on the real openb trace: skipped, with the reason, when the trace folder is not there."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from gpuslice.fgd.engine import RunResult, Workload, simulate
from gpuslice.fgd.trace import OpenbTraceError, load_trace, resolve_trace_dir


@pytest.fixture(scope="session")
def trace_dir():  # type: ignore[no-untyped-def]
    try:
        return resolve_trace_dir()
    except OpenbTraceError as error:
        pytest.skip(f"openb trace not available: {error}")


@pytest.fixture(scope="session")
def default_workload(trace_dir):  # type: ignore[no-untyped-def]
    return Workload.from_trace(load_trace("default", trace_dir))


@pytest.fixture(scope="session")
def simulated_default(default_workload: Workload) -> Callable[[str, int], RunResult]:
    """`simulate(default workload, policy, seed)`, each run once a session: the golden numbers, the golden
    trajectories and the engine's checks ask for the same runs (a run is a function of its seed: tested
    apart), about 20 runs instead of 40."""
    runs: dict[tuple[str, int], RunResult] = {}

    def run(policy: str, seed: int) -> RunResult:
        if (policy, seed) not in runs:
            runs[policy, seed] = simulate(default_workload, policy, seed)
        return runs[policy, seed]

    return run
