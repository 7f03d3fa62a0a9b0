"""FGD's fast paths agree with each other: Python scoring of a few states equals the numpy batch, and a
state derived from its parent equals one derived from scratch."""

from __future__ import annotations

import numpy as np
import pytest

from gpuslice.fgd.engine import Workload, run_plan
from gpuslice.fgd.policies import PolicyContext, make_policy
from gpuslice.fgd.policies import fgd as fgd_module
from gpuslice.fgd.policies.fgd import INFEASIBLE, FgdPolicy
from gpuslice.fgd.protocol import plan_arrivals
from gpuslice.fgd.state import OpenbCluster


@pytest.fixture(scope="module")
def busy_cluster(default_workload: Workload) -> OpenbCluster:
    """The default trace's cluster after seed 7's pods up to 70 % of capacity: thousands of node states."""
    plan = plan_arrivals(default_workload.trace.pods, 1213, default_workload.total_gpus, 7, ratio=0.7)
    return run_plan(default_workload, "fgd", plan)[1]


def fresh_scorer(name: str, cluster: OpenbCluster, workload: Workload) -> fgd_module.FgdScorer:
    context = PolicyContext(cluster, workload.shapes.shapes, workload.typical, np.random.default_rng(0))
    policy = make_policy(name, context)
    assert isinstance(policy, FgdPolicy)
    return policy.scorer


@pytest.mark.parametrize("name", ["fgd", "fgd-cpu", "fgd-cpu-sym"])
def test_python_scores_equal_the_numpy_batches(
    busy_cluster: OpenbCluster, default_workload: Workload, name: str
) -> None:
    sids = np.random.default_rng(1).choice(busy_cluster.states.size, 500, replace=False)
    batch = fresh_scorer(name, busy_cluster, default_workload)
    single = fresh_scorer(name, busy_cluster, default_workload)
    checked = 0
    for shape in default_workload.shapes.shapes:
        matrix = batch.slot_matrix(busy_cluster.states.rows(sids), shape)
        best = matrix.max(axis=1)
        single.score_few(sids, shape)
        assert single.cache[shape.index, sids].tolist() == best.tolist(), shape
        if matrix.shape[1] > 1:
            valid = best >= 0
            bits = (matrix == best[:, None]) @ batch.slot_bits[: matrix.shape[1]]
            assert single.best_slots[shape.index, sids][valid].tolist() == bits[valid].tolist(), shape
        checked += int((best != INFEASIBLE).sum())
    assert checked > 5_000  # feasible (state, shape) pairs, not just infeasible ones


def test_states_derived_from_their_parent_equal_a_derivation_from_scratch(busy_cluster: OpenbCluster) -> None:
    states = busy_cluster.states
    assert states.underived == 0 and states.size > 2000
    derived = states.packed[: states.size].copy()
    again = states._derive(derived.copy())
    assert np.array_equal(again, derived)
