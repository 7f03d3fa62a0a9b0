"""The health state machine: which devices an event marks, and when a probe may heal them."""

from __future__ import annotations

import pytest

from gpuslice.discovery import load_node_spec
from gpuslice.discovery.xid import XidEvent
from gpuslice.gpu import Node
from gpuslice.health import (
    EventOutcome,
    HealthTracker,
    Mark,
    RecoveryPolicy,
    XidPolicy,
    event_targets,
    probe_targets,
    xid_policy_from_env,
)

PLAIN = load_node_spec("preset:h100x4").node
MIG = load_node_spec("preset:h100x4-mig").node
GPU0, GPU1 = PLAIN.gpus[0].uuid, PLAIN.gpus[1].uuid
MIG_GPU = MIG.gpus[0]
MIG_A, MIG_B = MIG_GPU.mig_instances[0], MIG_GPU.mig_instances[1]


def tracker(
    node: Node = PLAIN, recovery: bool = False, quiet_s: float = 0.0, env: dict[str, str] | None = None
) -> HealthTracker:
    return HealthTracker(node, xid_policy_from_env(env or {}), RecoveryPolicy(recovery, quiet_s=quiet_s))


@pytest.mark.parametrize(
    ("event", "node", "expected"),
    [
        (XidEvent(GPU0, 79), PLAIN, (GPU0,)),
        (XidEvent(None, 0, reason="wait failed"), PLAIN, tuple(g.uuid for g in PLAIN.gpus)),
        (XidEvent("GPU-not-here", 79), PLAIN, ()),
        (XidEvent(MIG_GPU.uuid, 79), MIG, (MIG_GPU.uuid,)),  # the GPU mark covers its MIG devices
        (XidEvent(MIG_GPU.uuid, 79, gi=MIG_B.gi, ci=MIG_B.ci), MIG, (MIG_B.uuid,)),
        (XidEvent(MIG_GPU.uuid, 79, gi=99, ci=0), MIG, (MIG_GPU.uuid,)),  # unplaceable: the whole GPU
        (XidEvent(MIG_A.uuid, 79), MIG, (MIG_A.uuid,)),  # the events file may name a MIG device
    ],
)
def test_event_targets(event: XidEvent, node: Node, expected: tuple[str, ...]) -> None:
    assert event_targets(event, node) == expected


def test_probe_targets_cover_a_gpu_and_its_mig_devices() -> None:
    assert probe_targets(MIG_GPU.uuid, MIG) == (MIG_GPU.uuid, *(m.uuid for m in MIG_GPU.mig_instances))
    assert probe_targets(MIG_A.uuid, MIG) == (MIG_A.uuid,)
    assert probe_targets("GPU-x", MIG) == ()


@pytest.mark.parametrize(
    ("xid", "env", "outcome"),
    [
        (79, {}, EventOutcome.MARKED),
        (13, {}, EventOutcome.IGNORED),
        (94, {"DP_DISABLE_HEALTHCHECKS": "94"}, EventOutcome.IGNORED),
        (13, {"DP_ENABLE_HEALTHCHECKS": "13"}, EventOutcome.MARKED),
        (79, {"DP_DISABLE_HEALTHCHECKS": "all"}, EventOutcome.CHECKS_DISABLED),
    ],
)
def test_event_outcome(xid: int, env: dict[str, str], outcome: EventOutcome) -> None:
    result = tracker(env=env).on_event(XidEvent(GPU0, xid), now=0.0)
    assert result.outcome is outcome
    assert bool(result.marks) is (outcome is EventOutcome.MARKED)


def test_unknown_device_marks_nothing() -> None:
    assert tracker().on_event(XidEvent("GPU-gone", 79), 0.0).outcome is EventOutcome.UNKNOWN_DEVICE


def test_a_second_event_on_an_unhealthy_gpu_marks_nothing_new() -> None:
    t = tracker()
    first = t.on_event(XidEvent(GPU0, 79), 0.0)
    assert first.marks == (Mark(GPU0, False, "Xid=79 on " + GPU0),)
    assert t.on_event(XidEvent(GPU0, 48), 1.0).marks == ()
    assert list(t.unhealthy()) == [GPU0]


def test_recovery_off_by_default_keeps_the_gpu_unhealthy() -> None:
    t = tracker()
    t.on_event(XidEvent(GPU0, 79), 0.0)
    result = t.on_probe(GPU0, True, 10.0)
    assert result.marks == ()
    assert "recovery is off" in result.note
    assert list(t.unhealthy()) == [GPU0]


def test_recovery_heals_after_a_passed_probe() -> None:
    t = tracker(recovery=True)
    t.on_event(XidEvent(GPU0, 79), 0.0)
    assert [m.physical_id for m in t.on_probe(GPU0, True, 0.0).marks] == [GPU0]
    assert t.unhealthy() == {}


def test_probe_before_any_event_changes_nothing() -> None:
    t = tracker(recovery=True)
    assert t.on_probe(GPU0, True, 0.0).marks == ()
    t.on_event(XidEvent(GPU0, 79), 1.0)
    assert list(t.unhealthy()) == [GPU0]


def test_probe_on_another_gpu_does_not_heal() -> None:
    t = tracker(recovery=True)
    t.on_event(XidEvent(GPU0, 79), 0.0)
    assert t.on_probe(GPU1, True, 1.0).marks == ()
    assert list(t.unhealthy()) == [GPU0]


def test_failed_probe_keeps_it_unhealthy() -> None:
    t = tracker(recovery=True)
    t.on_event(XidEvent(GPU0, 79), 0.0)
    result = t.on_probe(GPU0, False, 5.0, "fell off the bus")
    assert result.marks == () and "fell off the bus" in result.note


def test_quiet_period_restarts_with_each_event() -> None:
    t = tracker(recovery=True, quiet_s=60.0)
    t.on_event(XidEvent(GPU0, 79), 0.0)
    assert t.due_probes(59.0) == []
    assert t.due_probes(60.0) == [GPU0]
    t.on_event(XidEvent(GPU0, 79), 50.0)
    assert t.due_probes(100.0) == []
    assert t.on_probe(GPU0, True, 100.0).marks == ()  # too early: still in the quiet period
    assert [m.physical_id for m in t.on_probe(GPU0, True, 110.0).marks] == [GPU0]


def test_probe_interval_spaces_active_probes() -> None:
    t = HealthTracker(PLAIN, XidPolicy(), RecoveryPolicy(True, quiet_s=0.0, probe_interval_s=30.0))
    t.on_event(XidEvent(GPU0, 79), 0.0)
    t.on_probe(GPU0, False, 1.0)
    assert t.due_probes(20.0) == []
    assert t.due_probes(31.0) == [GPU0]


def test_no_due_probes_when_recovery_is_off() -> None:
    t = tracker()
    t.on_event(XidEvent(GPU0, 79), 0.0)
    assert t.due_probes(1e9) == []


def test_gpu_probe_heals_its_mig_devices_and_mig_probe_only_itself() -> None:
    t = tracker(MIG, recovery=True)
    t.on_event(XidEvent(MIG_GPU.uuid, 79, gi=MIG_A.gi, ci=MIG_A.ci), 0.0)
    t.on_event(XidEvent(MIG_B.uuid, 48), 0.0)
    assert t.on_probe(MIG_A.uuid, True, 1.0).marks == (Mark(MIG_A.uuid, True, "probe passed"),)
    assert list(t.unhealthy()) == [MIG_B.uuid]
    t.on_event(XidEvent(MIG_GPU.uuid, 79), 2.0)
    healed = {m.physical_id for m in t.on_probe(MIG_GPU.uuid, True, 3.0).marks}
    assert healed == {MIG_B.uuid, MIG_GPU.uuid}
    assert t.unhealthy() == {}
