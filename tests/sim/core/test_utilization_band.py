"""Utilization on the synthetic trace lands in the band its offered load predicts.

The derivation (nothing here is tuned to the simulator's output):

The generator draws n jobs with Poisson arrivals at rate lambda, independent GPU sizes g (the job mix) and
durations d (log-uniform on [a, b]), on C GPUs; its nominal offered load is rho = lambda E[g] E[d] / C.

Step 1, the trace. Its work is W = sum of g_j d_j and its arrival span A = last submit - first submit; its
realized offered load is rho_hat = W / (C A). W / E[W] is a mean of n i.i.d. terms, so it lies within
1 +- k cv_W with cv_W = sd(g d) / (E[g d] sqrt(n)) and Var(g d) = E[g^2] E[d^2] - (E[g] E[d])^2; A is a sum
of n - 1 exponential gaps, within (n - 1)/lambda (1 +- k / sqrt(n - 1)). With E[W] = n rho C / lambda:

    rho_hat in rho (1 +- k cv_W) n / ((n - 1)(1 -+ k / sqrt(n - 1)))        (k = 4 standard deviations)

Step 2, the run. With no cross-island penalty a running job keeps exactly g GPUs busy for exactly d
seconds, so once every job has completed (asserted) the busy GPU-seconds equal W (work conservation), and
utilization over the window L = last completion - first submit is U = W / (C L) = rho_hat A / L. The window
is at least A, and at most A + b + w_max: the last job to finish was submitted by the last arrival,
waited at most the longest wait and ran at most b seconds. So

    rho_hat A / (A + b + w_max) <= U <= rho_hat

Only w_max, the queueing delay, comes from the run. With a cross-island penalty the busy time grows but the
work done does not, so the same band holds for goodput (busy GPUs divided by each job's slowdown).
"""

from __future__ import annotations

import math

import pytest

from gpuslice.sim.core.engine import Engine, SimConfig
from gpuslice.sim.core.metrics import SimResult
from gpuslice.sim.policies import make_policy
from gpuslice.sim.traces import SyntheticParams, Trace, generate

K_SIGMA = 4.0
PARAMS = SyntheticParams(jobs=10_000, load=0.6, nodes=64, island=8)


@pytest.fixture(scope="module")
def trace() -> Trace:
    return generate(PARAMS, seed=7)


def realized_load(trace: Trace) -> tuple[float, float]:
    """(rho_hat, arrival span A) of a generated trace."""
    work = sum(job.gpus * job.duration for job in trace.jobs)
    span = trace.jobs[-1].submit - trace.jobs[0].submit
    return work / (trace.cluster.total_gpus * span), span


def run(trace: Trace, policy: str, penalty: float) -> tuple[SimResult, float]:
    engine = Engine(trace.cluster, trace.jobs, make_policy(policy), config=SimConfig(cross_island_penalty=penalty))
    result = engine.run()
    assert result.jobs_completed == PARAMS.jobs  # work conservation needs every job to finish
    return result, max(run.wait or 0.0 for run in engine.runs)


def test_the_generated_trace_offers_its_nominal_load(trace: Trace) -> None:
    n = PARAMS.jobs
    mean_work = PARAMS.mean_gpus() * PARAMS.mean_duration()
    work_sd = math.sqrt(PARAMS.mean_gpus_squared() * PARAMS.mean_duration_squared() - mean_work**2)
    cv_work = work_sd / (mean_work * math.sqrt(n))
    span_spread = K_SIGMA / math.sqrt(n - 1)
    low = PARAMS.load * (1 - K_SIGMA * cv_work) * n / ((n - 1) * (1 + span_spread))
    high = PARAMS.load * (1 + K_SIGMA * cv_work) * n / ((n - 1) * (1 - span_spread))
    rho_hat, _ = realized_load(trace)
    assert low <= rho_hat <= high, (low, rho_hat, high)


@pytest.mark.parametrize("policy", ["first-fit", "best-fit", "gang", "topology-aware"])
def test_utilization_is_in_the_band_of_the_offered_load(trace: Trace, policy: str) -> None:
    result, max_wait = run(trace, policy, penalty=0.0)
    rho_hat, span = realized_load(trace)
    low = rho_hat * span / (span + PARAMS.duration_max + max_wait)
    assert low <= result.gpu_utilization <= rho_hat, (low, result.gpu_utilization, rho_hat)
    assert result.gpu_goodput == pytest.approx(result.gpu_utilization)


def test_with_a_penalty_goodput_stays_in_the_band_and_utilization_rises_above_it(trace: Trace) -> None:
    result, max_wait = run(trace, "first-fit", penalty=0.5)
    rho_hat, span = realized_load(trace)
    assert result.cross_island_jobs > 0
    assert span * rho_hat / (span + 1.5 * PARAMS.duration_max + max_wait) <= result.gpu_goodput <= rho_hat
    assert result.gpu_utilization > result.gpu_goodput
