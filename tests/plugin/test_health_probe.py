"""Active recovery probes (the NVML path) through the health loop, with an in-test prober."""

from __future__ import annotations

import threading
from pathlib import Path

from gpuslice.discovery import load_node_spec
from gpuslice.discovery.health_file import HealthFileSource
from gpuslice.health import HealthTracker, RecoveryPolicy, XidPolicy
from gpuslice.health.loop import HealthLoop
from gpuslice.sharing import HealthStore

NODE = load_node_spec("preset:h100x4-mig").node
WAIT_S = 10.0


class ScriptedProber:
    """Answers from a script (one answer per call, the last one repeats); records what it was asked."""

    def __init__(self, *answers: bool) -> None:
        self.answers = list(answers)
        self.asked: list[str] = []
        self.asked_twice = threading.Event()

    def probe(self, gpu_uuid: str) -> tuple[bool, str]:
        self.asked.append(gpu_uuid)
        if len(self.asked) >= 2:
            self.asked_twice.set()
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        return answer, "scripted"


def wait_store(store: HealthStore, unhealthy: set[str]) -> bool:
    changed = threading.Event()
    remove = store.add_listener(changed.set)
    try:
        while set(store.snapshot()) != unhealthy:
            if not changed.wait(WAIT_S):
                return False
            changed.clear()
        return True
    finally:
        remove()


def run_loop(tmp_path: Path, prober: ScriptedProber, recovery: bool) -> tuple[HealthLoop, HealthStore, Path]:
    events = tmp_path / "events"
    store = HealthStore(NODE)
    policy = RecoveryPolicy(recovery, quiet_s=0.0, probe_interval_s=0.01)
    loop = HealthLoop(store, HealthTracker(NODE, XidPolicy(), policy), HealthFileSource(events, 0.005), prober)
    loop.start()
    return loop, store, events


def test_a_passed_probe_heals_a_mig_device_through_its_parent(tmp_path: Path) -> None:
    prober = ScriptedProber(False, True)
    loop, store, events = run_loop(tmp_path, prober, recovery=True)
    try:
        mig = NODE.gpus[1].mig_instances[2]
        events.write_text(f"{mig.uuid} 79\n")
        assert wait_store(store, {mig.uuid})
        assert wait_store(store, set())
        assert prober.asked[:2] == [NODE.gpus[1].uuid, NODE.gpus[1].uuid]
    finally:
        loop.stop()


def test_no_probes_when_recovery_is_off(tmp_path: Path) -> None:
    prober = ScriptedProber(True)
    loop, store, events = run_loop(tmp_path, prober, recovery=False)
    try:
        events.write_text(f"{NODE.gpus[0].uuid} 79\n")
        assert wait_store(store, {NODE.gpus[0].uuid})
        assert loop.thread_names == ["gpuslice-health"]
    finally:
        loop.stop()
    assert prober.asked == []


def test_failing_probes_keep_the_gpu_unhealthy(tmp_path: Path) -> None:
    prober = ScriptedProber(False)
    loop, store, events = run_loop(tmp_path, prober, recovery=True)
    try:
        events.write_text(f"{NODE.gpus[0].uuid} 79\n")
        assert wait_store(store, {NODE.gpus[0].uuid})
        assert prober.asked_twice.wait(WAIT_S)
        assert set(store.snapshot()) == {NODE.gpus[0].uuid}
    finally:
        loop.stop()
    assert loop.alive
