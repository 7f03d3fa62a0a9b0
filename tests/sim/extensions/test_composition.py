"""Extensions attach by composition: a listener brings its own metrics and report section; traces declare
the physics that attach the built-in extensions."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gpuslice.sim.core.engine import Engine, Listener, SimConfig
from gpuslice.sim.core.runs import JobRun
from gpuslice.sim.core.sections import ReportSection, number
from gpuslice.sim.experiments.compare import compare
from gpuslice.sim.extensions.fairness import FAIRNESS_SECTION
from gpuslice.sim.policies import make_policy
from gpuslice.sim.report.extension_tables import extension_rows
from gpuslice.sim.traces import TracePhysics, resolve_trace

STARTS = ReportSection("starts seen by a listener", (("starts", number("starts")),))


class CountStarts(Listener):
    section = STARTS

    def __init__(self) -> None:
        self.starts = 0

    def on_start(self, engine: Engine, run: JobRun, positions: tuple[int, ...]) -> None:
        self.starts += len(positions)

    def extras(self, engine: Engine) -> dict[str, Any]:
        return {"starts": self.starts}


def test_a_listener_added_to_the_engine_reports_its_metrics_and_section() -> None:
    trace = resolve_trace("adversarial", seed=0)
    engine = Engine(trace.cluster, trace.jobs, make_policy("first-fit"))
    counter = CountStarts()
    engine.add_listener(counter)
    result = engine.run()
    pods = sum(len(job.pods) for job in trace.jobs)
    assert result.summary()["starts"] == counter.starts == pods
    assert result.sections == (STARTS,)


def test_declared_tenant_weights_attach_fairness_to_any_trace() -> None:
    trace = resolve_trace("synthetic:jobs=200,nodes=8", seed=1)
    plain = compare(trace, ["first-fit"], SimConfig(seed=1))
    assert extension_rows(plain) == [] and "jain_index" not in plain.results[0].summary()
    weighted = replace(trace, physics=TracePhysics(tenant_weights={"tenant-0": 2.0}))
    comparison = compare(weighted, ["first-fit", "wdrf"], SimConfig(seed=1))
    assert [section for section, _ in extension_rows(comparison)] == [FAIRNESS_SECTION]
    assert all("jain_index" in result.summary() for result in comparison.results)
