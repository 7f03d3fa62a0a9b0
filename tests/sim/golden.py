"""The event simulator's golden numbers: `sim compare` on every built-in trace with its default policies,
including the extension report sections (preemption, fairness, NVLink, sharing tiers, Kueue).

Regenerate (only when a change is meant to alter results): `python -m tests.sim.golden`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from gpuslice.sim.core.engine import SimConfig
from gpuslice.sim.experiments.compare import DEFAULT_POLICIES, compare
from gpuslice.sim.experiments.variants import default_policies
from gpuslice.sim.report.extension_tables import extension_rows
from gpuslice.sim.traces import resolve_trace

GOLDEN_FILE = Path(__file__).with_name("golden_compare.json")
# Every built-in trace at its default size (the synthetic workload trace is the largest: about 2 s).
TRACE_REFS = (
    "adversarial",
    "two-gang",
    "synthetic",
    "preemption",
    "tenants",
    "topology",
    "sharing",
)
SEED = 7


def golden_numbers() -> dict[str, Any]:
    """{trace ref: {"comparison": the JSON of `sim compare`, "sections": {title: table rows}}}."""
    numbers: dict[str, Any] = {}
    for ref in TRACE_REFS:
        trace = resolve_trace(ref, SEED)
        policies = default_policies(trace.name) or DEFAULT_POLICIES
        comparison = compare(trace, policies, SimConfig(seed=SEED))
        numbers[ref] = {
            "comparison": json.loads(json.dumps(comparison.to_json())),
            "sections": {section.title: rows for section, rows in extension_rows(comparison)},
        }
    return numbers


def main() -> None:
    GOLDEN_FILE.write_text(json.dumps(golden_numbers(), indent=1, sort_keys=True) + "\n")
    sys.stdout.write(f"wrote {GOLDEN_FILE.name}\n")


if __name__ == "__main__":
    main()
