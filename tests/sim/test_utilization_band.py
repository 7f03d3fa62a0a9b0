"""Utilization on the synthetic trace lands in the band its offered load predicts.

The derivation (nothing here is tuned to the simulator's output):

Let the generator draw n jobs with Poisson arrivals at rate lambda, independent GPU sizes g (the job mix)
and durations d (log-uniform on [a, b]), on C GPUs. Its offered load is rho = lambda E[g] E[d] / C.

With no cross-island penalty a running job keeps exactly g GPUs busy for exactly d seconds, and when every
job completes (asserted), the busy GPU-seconds equal the trace's work W = sum of g_j d_j (work conservation).
Utilization over the run's window L = (last completion - first submission) is U = W / (C L). Writing
E[W] = n E[g] E[d] = n rho C / lambda:

    U = rho * (W / E[W]) * (n / lambda) / L

- W / E[W] is a sum of n i.i.d. terms, so it lies within 1 +- k cv_W, cv_W = sd(g d) / (E[g d] sqrt(n)),
  with Var(g d) = E[g^2] E[d^2] - (E[g] E[d])^2 (g and d independent). We take k = 4 standard deviations.
- L is at least the arrival span A (n - 1 exponential gaps: mean (n - 1) / lambda, sd sqrt(n - 1) / lambda,
  again k standard deviations either way), and at most A + d_max + w_max: the last job to finish was
  submitted by the last arrival, waited at most the longest wait, and ran at most b seconds.

So U_low = rho (1 - k cv_W) n / ((n - 1)(1 + k / sqrt(n - 1)) + lambda (b + w_max)) and
U_high = rho (1 + k cv_W) n / ((n - 1)(1 - k / sqrt(n - 1))). Only w_max, the queueing delay, comes
from the run; every other quantity comes from the generator's parameters.
"""

from __future__ import annotations

import math

import pytest

from gpuslice.sim.engine import Engine, SimConfig
from gpuslice.sim.policies import make_policy
from gpuslice.sim.traces import SyntheticParams, generate

K_SIGMA = 4.0
PARAMS = SyntheticParams(jobs=10_000, load=0.6, nodes=64, island=8)


def predicted_band(params: SyntheticParams, cluster_gpus: int, max_wait: float) -> tuple[float, float]:
    n = params.jobs
    rate = params.arrival_rate(cluster_gpus)
    mean_work = params.mean_gpus() * params.mean_duration()
    work_variance = params.mean_gpus_squared() * params.mean_duration_squared() - mean_work**2
    cv_work = math.sqrt(work_variance / n) / mean_work
    span_spread = K_SIGMA / math.sqrt(n - 1)
    low = params.load * (1 - K_SIGMA * cv_work) * n / ((n - 1) * (1 + span_spread) + rate * (params.duration_max + max_wait))
    high = params.load * (1 + K_SIGMA * cv_work) * n / ((n - 1) * (1 - span_spread))
    return low, high


@pytest.fixture(scope="module")
def trace():  # type: ignore[no-untyped-def]
    return generate(PARAMS, seed=7)


@pytest.mark.parametrize("policy", ["first-fit", "best-fit", "gang", "topology-aware"])
def test_synthetic_utilization_is_in_the_offered_load_band(trace, policy: str) -> None:  # type: ignore[no-untyped-def]
    engine = Engine(trace.cluster, trace.jobs, make_policy(policy), config=SimConfig(cross_island_penalty=0.0))
    result = engine.run()
    assert result.jobs_completed == PARAMS.jobs  # work conservation needs every job to finish
    max_wait = max(run.wait or 0.0 for run in engine.runs)
    low, high = predicted_band(PARAMS, trace.cluster.total_gpus, max_wait)
    assert low < PARAMS.load < high  # the band brackets rho itself
    assert low <= result.gpu_utilization <= high, (low, result.gpu_utilization, high)


def test_the_band_is_narrow_enough_to_mean_something() -> None:
    low, high = predicted_band(PARAMS, 512, max_wait=0.0)
    assert high - low < 0.2 * PARAMS.load
