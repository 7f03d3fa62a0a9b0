"""Golden trajectories: every openb policy's failed pods, whole unallocated-GPU curve and per-pod trajectory per seed.

Speed work on the engine and the policies must not change a single placement. The golden file holds, per
(workload, policy, seed), the failed-pod count, the unallocated-GPU curve by arrived % (as `record_of`
rounds it) and a digest of the whole per-pod trajectory (allocated milli and fragmentation after each pod).
Rewrite it only for a deliberate change of results: `python -m tests.fgd.test_golden_trajectory --write`.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gpuslice.fgd.engine import RunResult, Workload, simulate
from gpuslice.fgd.metrics import record_of
from gpuslice.fgd.policies import FACTORIES
from gpuslice.fgd.trace import load_trace, resolve_trace_dir

GOLDEN_FILE = Path(__file__).with_name("golden_trajectory.json")
CASES: tuple[tuple[str, str, int], ...] = (
    *(
        ("default", policy, seed)
        for policy in FACTORIES
        for seed in ((42, 43, 44) if policy in ("fgd", "best-fit") else (42, 43))
    ),
    ("gpuspec33", "fgd", 42),  # model-pinned pods: the mask paths
)


def summary(result: RunResult) -> dict[str, Any]:
    record = record_of(result)
    trajectory = hashlib.sha256(
        np.ascontiguousarray(result.allocated_milli, dtype="<i8").tobytes()
        + np.ascontiguousarray(result.frag_milli, dtype="<f8").tobytes()
    ).hexdigest()
    return {
        "pods": result.pods,
        "failed_pods": result.failed,
        "unallocated_gpu_pct": [row["unallocated_gpu_pct"] for row in record["curve"]],
        "trajectory_sha256": trajectory,
    }


def case_key(workload: str, policy: str, seed: int) -> str:
    return f"{workload}/{policy}/{seed}"


@pytest.fixture(scope="module")
def golden() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(GOLDEN_FILE.read_text())
    return data


@pytest.fixture(scope="module")
def workloads(trace_dir: Path) -> dict[str, Workload]:
    names = dict.fromkeys(workload for workload, _, _ in CASES if workload != "default")
    return {name: Workload.from_trace(load_trace(name, trace_dir)) for name in names}


def test_the_golden_file_covers_every_policy(golden: dict[str, Any]) -> None:
    assert set(golden) == {case_key(*case) for case in CASES}
    assert {key.split("/")[1] for key in golden} == set(FACTORIES)


@pytest.mark.parametrize("policy", list(FACTORIES))
def test_results_equal_the_golden_ones(
    golden: dict[str, Any],
    workloads: dict[str, Workload],
    simulated_default: Callable[[str, int], RunResult],
    policy: str,
) -> None:
    for workload, name, seed in CASES:
        if name != policy:
            continue
        expected = golden[case_key(workload, name, seed)]
        # the default workload's runs are shared with the other golden tests (the same trace, the same runs)
        result = simulated_default(name, seed) if workload == "default" else simulate(workloads[workload], name, seed)
        got = summary(result)
        where = case_key(workload, name, seed)
        assert got["failed_pods"] == expected["failed_pods"], where
        assert got["unallocated_gpu_pct"] == expected["unallocated_gpu_pct"], where
        assert got == expected, where


def write() -> None:
    folder = resolve_trace_dir()
    loaded = {name: Workload.from_trace(load_trace(name, folder)) for name in dict.fromkeys(w for w, _, _ in CASES)}
    data = {case_key(w, p, s): summary(simulate(loaded[w], p, s)) for w, p, s in CASES}
    GOLDEN_FILE.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {len(data)} cases to {GOLDEN_FILE.name}")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python -m tests.fgd.test_golden_trajectory --write")
    write()
