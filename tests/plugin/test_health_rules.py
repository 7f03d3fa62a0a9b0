"""Health rules end to end: an event line in the file -> every derived device Unhealthy at the mock kubelet."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from gpuslice.wire import UNHEALTHY
from tests.support.stack import MIG_MIXED, TIME_SLICED_4, Stack, start_stack


def start(stacks: list[Stack], workdir: Path, **kwargs: object) -> Stack:
    stack = start_stack(workdir, **kwargs)  # type: ignore[arg-type]
    stacks.append(stack)
    return stack


def test_every_replica_of_a_broken_gpu_turns_unhealthy(stacks: list[Stack], workdir: Path) -> None:
    stack = start(stacks, workdir, config=TIME_SLICED_4)
    gpu = stack.node.gpus[1].uuid
    stack.write(f"{gpu} 79")
    assert stack.wait_health(stack.expected_health({gpu}))
    view = stack.views()["nvidia.com/gpu"]
    assert sorted(view.unhealthy) == sorted(f"{gpu}::{n}" for n in range(4))
    assert (view.capacity, view.allocatable) == (16, 12)


def test_every_mig_device_of_a_broken_gpu_turns_unhealthy(stacks: list[Stack], workdir: Path) -> None:
    stack = start(stacks, workdir, preset="h100x4-mig", config=MIG_MIXED)
    gpu = stack.node.gpus[2]
    stack.write(f"{gpu.uuid} 48")
    assert stack.wait_health(stack.expected_health({gpu.uuid}))
    unhealthy = {d for d, h in stack.kubelet_health().items() if h == UNHEALTHY}
    assert unhealthy == {m.uuid for m in gpu.mig_instances}


def test_a_mig_scoped_line_hits_one_mig_device(stacks: list[Stack], workdir: Path) -> None:
    stack = start(stacks, workdir, preset="h100x4-mig", config=MIG_MIXED)
    mig = stack.node.gpus[0].mig_instances[3]
    stack.write(f"{mig.uuid} 94")
    assert stack.wait_health(stack.expected_health({mig.uuid}))


def test_an_event_without_a_device_hits_every_gpu(stacks: list[Stack], workdir: Path) -> None:
    stack = start(stacks, workdir, config=TIME_SLICED_4)
    stack.write("all 79")
    assert stack.wait_health(stack.expected_health({g.uuid for g in stack.node.gpus}))


def test_ignored_xids_and_unknown_devices_change_nothing(stacks: list[Stack], workdir: Path) -> None:
    stack = start(stacks, workdir, config=TIME_SLICED_4)
    gpu0, barrier = stack.node.gpus[0].uuid, stack.node.gpus[3].uuid
    updates = stack.views()["nvidia.com/gpu"].updates
    # The file is read in order, so once the barrier's mark is seen every earlier line has been handled.
    stack.write(*(f"{gpu0} {xid}" for xid in (13, 31, 43, 45, 68, 109)), "GPU-not-on-this-node 79", "garbage")
    stack.write(f"{barrier} 79")
    assert stack.wait_health(stack.expected_health({barrier}))
    assert stack.views()["nvidia.com/gpu"].updates == updates + 1  # only the barrier sent a new list


def test_env_can_make_an_ignored_xid_critical(stacks: list[Stack], workdir: Path) -> None:
    stack = start(stacks, workdir, env={"DP_ENABLE_HEALTHCHECKS": "13"})
    gpu = stack.node.gpus[0].uuid
    stack.write(f"{gpu} 13")
    assert stack.wait_health(stack.expected_health({gpu}))


def test_disabled_health_checks_do_not_follow_the_file(stacks: list[Stack], workdir: Path) -> None:
    stack = start(stacks, workdir, env={"DP_DISABLE_HEALTHCHECKS": "all"})
    assert stack.health_loop.alive
    assert stack.health_loop.thread_names == []


def test_recovery_line_is_ignored_when_recovery_is_off(stacks: list[Stack], workdir: Path) -> None:
    stack = start(stacks, workdir)
    gpu, barrier = stack.node.gpus[0].uuid, stack.node.gpus[1].uuid
    stack.write(f"{gpu} 79", f"{gpu} ok", f"{barrier} 79")
    assert stack.wait_health(stack.expected_health({gpu, barrier}))


def test_recovery_line_heals_when_recovery_is_on(stacks: list[Stack], workdir: Path) -> None:
    stack = start(stacks, workdir, config=TIME_SLICED_4, recovery=True)
    gpu = stack.node.gpus[0].uuid
    stack.write(f"{gpu} 79")
    assert stack.wait_health(stack.expected_health({gpu}))
    stack.write(f"{gpu} ok")
    assert stack.wait_health(stack.expected_health(set()))
    assert stack.views()["nvidia.com/gpu"].allocatable == 16


def reference_model(lines: list[str], stack: Stack, recovery: bool) -> set[str]:
    """An independent model of the rules: which physical IDs end up marked after these lines."""
    parents = {m.uuid: g.uuid for g in stack.node.gpus for m in g.mig_instances}
    children = {g.uuid: {m.uuid for m in g.mig_instances} for g in stack.node.gpus}
    ignored = {13, 31, 43, 45, 68, 109}
    marked: set[str] = set()
    for line in lines:
        device, what = line.split()
        if device not in parents and device not in children:
            continue
        if what == "ok":
            if recovery:
                marked -= {device} | children.get(device, set())
        elif int(what) not in ignored:
            marked.add(device)
    return marked


@pytest.mark.parametrize(("preset", "config"), [("h100x4", TIME_SLICED_4), ("h100x4-mig", MIG_MIXED)])
@pytest.mark.parametrize("recovery", [False, True])
def test_xid_storm_ends_in_exactly_the_right_state(
    stacks: list[Stack], workdir: Path, preset: str, config: str, recovery: bool
) -> None:
    stack = start(stacks, workdir, preset=preset, config=config, recovery=recovery)
    rng = random.Random(f"{preset}-{recovery}")
    *storm_gpus, barrier_gpu = stack.node.gpus
    devices = [g.uuid for g in storm_gpus] + [m.uuid for g in storm_gpus for m in g.mig_instances]
    devices.append("GPU-00000000-0000-0000-0000-000000000000")  # not on this node
    xids = [79, 48, 94, 63, 64, 92, 13, 31, 43, 45, 68, 109]
    lines = [f"{rng.choice(devices)} {rng.choice([*xids, 'ok', 'ok'])}" for _ in range(1000)]
    for start_at in range(0, 1000, 100):  # ten bursts, as a storm arrives
        stack.write(*lines[start_at : start_at + 100])
    stack.write(f"{barrier_gpu.uuid} 79")
    expected = reference_model(lines, stack, recovery) | {barrier_gpu.uuid}
    assert stack.wait_health(stack.expected_health(expected))
    assert set(stack.manager.health.snapshot()) == expected
