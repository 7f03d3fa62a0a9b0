"""Properties over random clusters and traces: no GPU is ever over-committed, and the fast pass is exact."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuslice.sim.core.clusters import parse_cluster
from gpuslice.sim.core.engine import Engine
from gpuslice.sim.core.model import ClusterSpec, JobSpec, PodSpec
from gpuslice.sim.core.runs import JobStatus
from gpuslice.sim.policies import POLICIES, make_policy
from gpuslice.units import MILLI

GPU_AMOUNTS = [0, 0.25, 0.5, 0.75, 1, 2, 3, 4, 8]

clusters = st.builds(
    lambda big, small, island: parse_cluster(
        f"{big}xdgx-h100+{small}xh100x4;island={island}" if big else f"{small}xh100x4;island={island}"
    ),
    st.integers(0, 2),
    st.integers(1, 2),
    st.integers(1, 2),
)
pods = st.builds(
    lambda gpu, cpu, memory: PodSpec.of(gpu, cpu_milli=cpu, memory_mib=memory),
    st.sampled_from(GPU_AMOUNTS),
    st.sampled_from([500, 8_000, 40_000]),
    st.sampled_from([1024, 200_000]),
)


@st.composite
def jobs(draw: st.DrawFn) -> list[JobSpec]:
    result = []
    for index in range(draw(st.integers(1, 9))):
        gang = draw(st.booleans())
        count = draw(st.integers(1, 3))
        # A gang's pods are identical (as in real distributed jobs); other jobs may mix shapes.
        shapes = [draw(pods)] * count if gang else [draw(pods) for _ in range(count)]
        result.append(
            JobSpec(
                f"j{index}",
                submit=float(draw(st.integers(0, 20))),
                duration=float(draw(st.integers(1, 20))),
                pods=tuple(shapes),
                priority=draw(st.integers(0, 1)),
                gang=gang,
            )
        )
    return result


def check_no_overcommit(engine: Engine) -> None:
    """Recompute every node's use from the bound pods alone and compare with capacity and the arrays."""
    state = engine.state
    used_gpu = np.zeros_like(state.gpu_capacity)
    used_cpu = np.zeros_like(state.cpu_capacity)
    used_memory = np.zeros_like(state.memory_capacity)
    for run in engine.runs:
        for position, binding in enumerate(run.bound):
            if binding is None:
                continue
            pod = run.spec.pods[position]
            assert len(binding.gpus) == pod.gpu_count
            for gpu in binding.gpus:
                used_gpu[binding.node, gpu] += pod.gpu_milli
            used_cpu[binding.node] += pod.cpu_milli
            used_memory[binding.node] += pod.memory_mib
    assert (used_gpu <= state.gpu_capacity).all(), "a GPU is over-committed"
    assert (used_cpu <= state.cpu_capacity).all() and (used_memory <= state.memory_capacity).all()
    assert np.array_equal(state.gpu_free, state.gpu_capacity - used_gpu)
    assert np.array_equal(state.cpu_free, state.cpu_capacity - used_cpu)
    assert np.array_equal(state.full_free, (state.gpu_free == MILLI).sum(axis=1))
    assert engine.held_milli == int(used_gpu.sum())


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=clusters, trace=jobs(), policy=st.sampled_from(list(POLICIES)))
def test_no_policy_ever_overcommits_a_gpu(spec: ClusterSpec, trace: list[JobSpec], policy: str) -> None:
    engine = Engine(spec, trace, make_policy(policy), observer=check_no_overcommit)
    result = engine.run()
    statuses = {run.status for run in engine.runs}
    assert JobStatus.RUNNING not in statuses
    assert not engine.holders  # every gang still holding pods at the end was found deadlocked
    if make_policy(policy).all_or_nothing:
        assert result.partial_allocation_deadlocks == 0
        assert statuses <= {JobStatus.DONE, JobStatus.REJECTED}
    elif result.partial_allocation_deadlocks == 0:
        assert statuses <= {JobStatus.DONE, JobStatus.REJECTED}


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=clusters, trace=jobs(), policy=st.sampled_from(list(POLICIES)))
def test_skipping_dead_shapes_changes_nothing(spec: ClusterSpec, trace: list[JobSpec], policy: str) -> None:
    def outcome(skip: bool) -> tuple[object, ...]:
        engine = Engine(spec, trace, make_policy(policy), skip_dead_shapes=skip)
        result = engine.run()
        runs = [(r.status, r.start_time, r.end_time, tuple(r.bound), r.deadlocked_at) for r in engine.runs]
        return (result.summary(), runs, engine.timeline.times, engine.timeline.busy, engine.timeline.stranded)

    assert outcome(True) == outcome(False)
