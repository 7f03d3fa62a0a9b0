"""The labeller's lifecycle: oneshot, periodic passes, reload, failures, and what is left behind on exit."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Mapping
from pathlib import Path

import pytest

from gpuslice.config import Config
from gpuslice.gpu import Node
from gpuslice.labels import FeatureFileSink, parse_features
from gpuslice.labels.loop import Labeller, LabellerSettings, LoopControl
from tests.labels.helpers import H100, config, node


class RecordingSink:
    description = "recording sink"

    def __init__(self) -> None:
        self.writes: list[dict[str, str]] = []
        self.withdrawn = 0

    def write(self, labels: Mapping[str, str]) -> None:
        self.writes.append(dict(labels))

    def withdraw(self) -> None:
        self.withdrawn += 1


class ScriptedControl(LoopControl):
    """Returns from each wait at once, recording its timeout; reloads and stops at given waits."""

    def __init__(self, stop_at: int, reload_at: tuple[int, ...] = ()) -> None:
        super().__init__()
        self.stop_at = stop_at
        self.reload_at = reload_at
        self.timeouts: list[float | None] = []

    def wait(self, timeout: float | None) -> None:
        self.timeouts.append(timeout)
        if len(self.timeouts) in self.reload_at:
            self.request_reload()
        if len(self.timeouts) >= self.stop_at:
            self.request_stop()


class Scenario:
    """A load() whose config can be swapped between reloads, over one node and one sink."""

    def __init__(self, text: str, sink: object | None = None) -> None:
        self.configs = [config(text)]
        self.sink = sink or RecordingSink()
        self.node: Node = node({**H100, "count": 2})
        self.loads = 0
        self.fail_next_load = False
        self.fail_discoveries = 0
        self.closed = 0

    def discover(self) -> Node:
        if self.fail_discoveries:
            self.fail_discoveries -= 1
            raise RuntimeError("NVML: GPU is lost")
        return self.node

    def load(self) -> LabellerSettings:
        self.loads += 1
        if self.fail_next_load:
            self.fail_next_load = False
            raise ValueError("invalid config cfg.yaml:3: flags.migStrategy: unknown MIG strategy: bogus")
        current: Config = self.configs[-1]
        return LabellerSettings(current, self.discover, self.sink, None, ("a config warning",), self.close)  # type: ignore[arg-type]

    def close(self) -> None:
        self.closed += 1


def clock() -> itertools.count[int]:
    return itertools.count(1000, 7)


def test_oneshot_labels_once_and_exits_zero() -> None:
    scenario = Scenario("flags: {gfd: {oneshot: true}}")
    ticks = clock()
    control = ScriptedControl(stop_at=99)
    assert Labeller(scenario.load, lambda: next(ticks)).run(control) == 0
    assert isinstance(scenario.sink, RecordingSink)
    assert len(scenario.sink.writes) == 1
    assert scenario.sink.writes[0]["nvidia.com/gfd.timestamp"] == "1000"
    assert control.timeouts == []
    assert scenario.sink.withdrawn == 0


def test_oneshot_failure_exits_one() -> None:
    scenario = Scenario("flags: {gfd: {oneshot: true}}")
    scenario.fail_discoveries = 1
    assert Labeller(scenario.load).run(ScriptedControl(stop_at=99)) == 1


def test_periodic_passes_keep_the_timestamp_and_withdraw_on_exit() -> None:
    scenario = Scenario("flags: {gfd: {sleepInterval: 90s}}")
    ticks = clock()
    control = ScriptedControl(stop_at=3)
    assert Labeller(scenario.load, lambda: next(ticks)).run(control) == 0
    sink = scenario.sink
    assert isinstance(sink, RecordingSink)
    assert len(sink.writes) == 3
    assert control.timeouts == [90.0, 90.0, 90.0]
    assert {labels["nvidia.com/gfd.timestamp"] for labels in sink.writes} == {"1000"}
    assert sink.withdrawn == 1


def test_periodic_file_is_removed_on_exit_but_infinite_keeps_it(tmp_path: Path) -> None:
    periodic = Scenario("flags: {gfd: {sleepInterval: 1m}}", FeatureFileSink(tmp_path / "periodic"))
    Labeller(periodic.load).run(ScriptedControl(stop_at=1))
    assert not (tmp_path / "periodic").exists()
    infinite = Scenario("flags: {gfd: {sleepInterval: infinite}}", FeatureFileSink(tmp_path / "infinite"))
    control = ScriptedControl(stop_at=1)
    Labeller(infinite.load).run(control)
    assert control.timeouts == [None]
    assert parse_features((tmp_path / "infinite").read_text())["nvidia.com/gpu.count"] == "2"


def test_reload_applies_the_new_config_and_renews_the_timestamp() -> None:
    scenario = Scenario("sharing:\n  timeSlicing:\n    resources: [{name: gpu, replicas: 4}]\n")
    ticks = clock()
    control = ScriptedControl(stop_at=3, reload_at=(1,))
    labeller = Labeller(scenario.load, lambda: next(ticks))
    scenario.configs.append(config("sharing:\n  timeSlicing:\n    resources: [{name: gpu, replicas: 8}]\n"))
    labeller.run(control)
    sink = scenario.sink
    assert isinstance(sink, RecordingSink)
    assert [labels["nvidia.com/gpu.replicas"] for labels in sink.writes] == ["4", "8", "8"]
    assert [labels["nvidia.com/gfd.timestamp"] for labels in sink.writes] == ["1000", "1007", "1007"]
    assert scenario.loads == 2
    assert scenario.closed == 2  # the replaced backend on reload, the last one on exit


def test_a_bad_reload_keeps_the_previous_settings(caplog: pytest.LogCaptureFixture) -> None:
    scenario = Scenario("")
    control = ScriptedControl(stop_at=2, reload_at=(1,))
    labeller = Labeller(scenario.load)
    scenario.fail_next_load = True
    assert labeller.run(control) == 0
    assert isinstance(scenario.sink, RecordingSink)
    assert len(scenario.sink.writes) == 2
    assert "reload failed, keeping the previous configuration" in caplog.text
    assert scenario.closed == 1  # the settings still in force are closed once, on exit


def test_a_failed_pass_does_not_stop_a_periodic_labeller(caplog: pytest.LogCaptureFixture) -> None:
    scenario = Scenario("")
    scenario.fail_discoveries = 1
    labeller = Labeller(scenario.load)
    assert labeller.run(ScriptedControl(stop_at=2)) == 0
    assert isinstance(scenario.sink, RecordingSink)
    assert len(scenario.sink.writes) == 1  # the second pass
    assert (labeller.passes, labeller.failures) == (2, 1)
    assert "GPU is lost" in caplog.text


def test_warnings_are_logged_once_not_every_pass(caplog: pytest.LogCaptureFixture) -> None:
    scenario = Scenario("")
    scenario.node = node({**H100, "count": 1}, {"model": "NVIDIA L4", "memory_mib": 23034, "compute_capability": "8.9"})
    caplog.set_level("WARNING")
    Labeller(scenario.load).run(ScriptedControl(stop_at=4))
    assert caplog.text.count("Multiple device types detected") == 1


@pytest.mark.parametrize("request_kind", ["reload", "stop"])
def test_real_control_wakes_an_infinite_wait(request_kind: str) -> None:
    control = LoopControl()
    woke = threading.Event()

    def wait() -> None:
        control.wait(None)
        woke.set()

    waiter = threading.Thread(target=wait)
    waiter.start()
    if request_kind == "reload":
        control.request_reload()
    else:
        control.request_stop()
    waiter.join(timeout=10)
    assert woke.is_set()
    assert control.take_reload() is (request_kind == "reload")
    assert control.take_reload() is False
    assert control.stop_requested is (request_kind == "stop")
