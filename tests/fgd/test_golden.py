"""The FGD reproduction on the default openb trace gives exactly the committed per-seed numbers."""

from __future__ import annotations

import json
from collections.abc import Callable

from gpuslice.fgd.engine import RunResult, Workload
from tests.fgd.golden import GOLDEN_FILE, golden_numbers


def test_per_seed_results_match_the_golden_file(
    default_workload: Workload, simulated_default: Callable[[str, int], RunResult]
) -> None:
    expected = json.loads(GOLDEN_FILE.read_text())
    assert golden_numbers(default_workload, simulated_default) == expected
