"""The lab's self-checking run: the four core policies on a workload trace, and the built-in checks as PASS/FAIL.

The checks, each with the figures it compared:
- best-fit strands fewer GPUs than first-fit on the adversarial trace (its holes are built for that);
- strict gang scheduling has no partial-allocation deadlock, on the workload trace and on two-gang;
- pod-by-pod first-fit does deadlock on two-gang (so the detector that found none above can see one);
- each policy's goodput on the workload lies in the band its offered load predicts (work conservation).

The band: with W = sum of GPUs x duration over the jobs, C GPUs and A the arrival span (last submit - first
submit), all over the admitted jobs (rejected ones never run), the realized offered load is rho = W / (C A).
When every admitted job completes, the work done over the run's window L (first submit to last event) is
exactly W, so goodput = W / (C L). The window is at least A and at most A_all + (1 + penalty) d_max + w_max
(A_all: the arrival span of every job, rejected included; the last job was submitted by the last arrival,
waited at most the longest wait, ran at most its longest stretched duration), so
W / (C (A_all + (1 + p) d_max + w_max)) <= goodput. From above the window is at least E = max_j (submit_j +
d_j) - the first admitted submit (every job runs at least its own duration after its submit) and at least A,
so goodput <= min(1, W / (C max(A, E))): a bound below 100 % even on a bursty trace, where rho is far above
it (all jobs at one instant: A = 0), so a goodput too high for the work offered fails. It needs the plain
engine's physics: on a trace with extension physics (checkpoints, NVLink slowdowns) or sharing tiers it is
skipped, and a run in which an admitted job never completed fails it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from gpuslice.sim.core.engine import SimConfig
from gpuslice.sim.core.metrics import SimResult
from gpuslice.sim.core.runs import JobStatus
from gpuslice.sim.experiments.compare import DEFAULT_POLICIES, Comparison, ComparisonProgress, compare
from gpuslice.sim.traces import Trace, TracePhysics, resolve_trace

DEFAULT_WORKLOAD = "synthetic"
ADVERSARIAL, TWO_GANG = "adversarial", "two-gang"
_SLACK = 1e-9  # relative: the band's bounds are exact, the float sums are not


class Verdict(enum.Enum):
    PASS = "PASS"
    FAIL = "FAIL"
    SKIP = "SKIP"


@dataclass(frozen=True)
class Check:
    claim: str
    verdict: Verdict
    figures: str  # what was compared, with the numbers


@dataclass
class LabRun:
    workload: Comparison
    adversarial: Comparison
    two_gang: Comparison
    checks: list[Check]

    @property
    def passed(self) -> bool:
        return all(check.verdict is not Verdict.FAIL for check in self.checks)

    @property
    def comparisons(self) -> tuple[Comparison, Comparison, Comparison]:
        return self.workload, self.adversarial, self.two_gang


def run_lab(
    workload_ref: str = DEFAULT_WORKLOAD,
    seed: int = 0,
    cross_island_penalty: float = SimConfig.cross_island_penalty,
    progress: ComparisonProgress | None = None,
) -> LabRun:
    """Run the four core policies on the workload, adversarial and two-gang traces, then every check."""
    config = SimConfig(cross_island_penalty=cross_island_penalty, seed=seed)
    workload = compare(resolve_trace(workload_ref, seed), DEFAULT_POLICIES, config, progress=progress)
    adversarial = compare(resolve_trace(ADVERSARIAL, seed), ("first-fit", "best-fit"), config)
    two_gang = compare(resolve_trace(TWO_GANG, seed), ("first-fit", "gang"), config)
    checks = [
        stranding_check(adversarial),
        gang_deadlock_check(workload, two_gang),
        detector_check(two_gang),
        *(band_check(workload.trace, result, cross_island_penalty) for result in workload.results),
    ]
    return LabRun(workload, adversarial, two_gang, checks)


def _result(comparison: Comparison, policy: str) -> SimResult:
    return next(result for result in comparison.results if result.policy == policy)


def stranding_check(adversarial: Comparison) -> Check:
    best, first = _result(adversarial, "best-fit"), _result(adversarial, "first-fit")
    verdict = Verdict.PASS if best.stranded_gpus < first.stranded_gpus else Verdict.FAIL
    return Check(
        f"best-fit strands fewer GPUs than first-fit on {adversarial.trace.name}",
        verdict,
        f"mean stranded GPUs: best-fit {best.stranded_gpus:.2f} < first-fit {first.stranded_gpus:.2f}",
    )


def gang_deadlock_check(workload: Comparison, two_gang: Comparison) -> Check:
    on_workload = _result(workload, "gang").partial_allocation_deadlocks
    on_two_gang = _result(two_gang, "gang").partial_allocation_deadlocks
    verdict = Verdict.PASS if on_workload == 0 and on_two_gang == 0 else Verdict.FAIL
    return Check(
        "gang scheduling has zero partial-allocation deadlocks",
        verdict,
        f"gang deadlocks: {on_workload} on {workload.trace.name}, {on_two_gang} on {two_gang.trace.name} (expected 0)",
    )


def detector_check(two_gang: Comparison) -> Check:
    first = _result(two_gang, "first-fit")
    verdict = Verdict.PASS if first.partial_allocation_deadlocks >= 1 else Verdict.FAIL
    return Check(
        f"pod-by-pod first-fit deadlocks on {two_gang.trace.name} (the detector sees a deadlock)",
        verdict,
        f"first-fit deadlocks: {first.partial_allocation_deadlocks} (expected >= 1), "
        f"{first.jobs_deadlocked} jobs deadlocked",
    )


@dataclass(frozen=True)
class Band:
    low: float
    high: float


def utilization_band(trace: Trace, result: SimResult, penalty: float) -> Band | str:
    """The goodput band of the module docstring, or the reason it does not apply to this run."""
    if trace.physics != TracePhysics():
        return "the trace declares extension physics (the band assumes plain durations)"
    admitted = [run for run in result.runs if run.status is not JobStatus.REJECTED]
    if len(admitted) < 2:
        return "fewer than two admitted jobs: no arrival span"
    unfinished = sum(run.status is not JobStatus.DONE for run in admitted)
    if unfinished:
        return (
            f"{unfinished} of {len(admitted)} admitted jobs did not complete, so the work done is not the work offered"
        )
    jobs = [run.spec for run in admitted]
    submits = [job.submit for job in jobs]
    span = max(submits) - min(submits)
    work = sum(job.gpus * job.duration for job in jobs)
    shortest_window = max(span, max(job.submit + job.duration for job in jobs) - min(submits))
    if shortest_window <= 0:
        return "every job arrives at once and takes no time: no window"
    high = min(1.0, work / (trace.cluster.total_gpus * shortest_window))
    longest = max(job.duration for job in jobs) * (1 + penalty)
    max_wait = float(result.waits.max()) if len(result.waits) else 0.0
    every = [job.submit for job in trace.jobs]
    span_all = max(every) - min(every)
    return Band(work / (trace.cluster.total_gpus * (span_all + longest + max_wait)), high)


def band_check(trace: Trace, result: SimResult, penalty: float) -> Check:
    claim = f"{result.policy}: goodput within the band of the offered load on {trace.name}"
    band = utilization_band(trace, result, penalty)
    value = result.gpu_goodput
    if isinstance(band, str):
        if "did not complete" in band:
            return Check(claim, Verdict.FAIL, band)
        return Check(claim, Verdict.SKIP, band)
    inside = band.low * (1 - _SLACK) <= value <= band.high * (1 + _SLACK)
    return Check(
        claim,
        Verdict.PASS if inside else Verdict.FAIL,
        f"{100 * band.low:.1f} % <= goodput {100 * value:.1f} % <= {100 * band.high:.1f} % (utilization "
        f"{100 * result.gpu_utilization:.1f} %)",
    )


def check_lines(checks: list[Check]) -> list[str]:
    return [f"{check.verdict.value}  {check.claim}: {check.figures}" for check in checks]
