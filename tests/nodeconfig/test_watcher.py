"""The watcher's rules, on the in-memory node source: what it applies, what it refuses and keeps, and why."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from gpuslice.config.node_config import NodeConfigChoice, NodeConfigError
from gpuslice.nodeconfig import FakeNodeSource, NodeConfigMetrics, NodeConfigWatcher, NodeEvent
from tests.nodeconfig.helpers import LABEL, config_dir, sample, settings, wait_for


class Applied:
    """The apply callback: records each choice; refuses the names in `bad` (a config that fails to load)."""

    def __init__(self, bad: tuple[str, ...] = ()) -> None:
        self.names: list[str | None] = []
        self.bad = bad

    def __call__(self, choice: NodeConfigChoice) -> bool:
        self.names.append(choice.name)
        return choice.name not in self.bad


def start(tmp_path: Path, source: FakeNodeSource, applied: Applied, default: str | None = None):  # type: ignore[no-untyped-def]
    registry = CollectorRegistry()
    watcher = NodeConfigWatcher(settings(config_dir(tmp_path), default), source, NodeConfigMetrics(registry))
    watcher.retry_first_s = 0.01
    first = watcher.initial_choice()
    watcher.start(applied)
    return watcher, first, registry


def test_label_changes_switch_the_config_and_other_changes_do_not(tmp_path: Path) -> None:
    source = FakeNodeSource({LABEL: "a100"})
    applied = Applied()
    watcher, first, registry = start(tmp_path, source, applied)
    try:
        assert (first.name, first.source) == ("a100", "label")
        source.set_labels({LABEL: "a100", "kubernetes.io/hostname": "gpu-node-1"})  # not our label
        source.set_labels({LABEL: "l4"})
        wait_for(lambda: applied.names == ["l4"], "the switch to l4")
        source.set_labels({})  # label removed: the named fallback
        wait_for(lambda: applied.names == ["l4", "default"], "the switch to the default config")
        assert sample(registry, "gpuslice_node_config_serving", config="default", source="named") == 1
        assert sample(registry, "gpuslice_node_config_serving", config="l4", source="label") is None
    finally:
        watcher.stop()


def test_a_label_naming_no_config_keeps_the_current_one_and_says_why(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    source = FakeNodeSource({LABEL: "l4"})
    applied = Applied()
    watcher, _, registry = start(tmp_path, source, applied)
    try:
        source.set_labels({LABEL: "h100"})
        wait_for(
            lambda: sample(registry, "gpuslice_node_config_refused", wanted="h100", reason="unknown_config") == 1,
            "the refusal",
        )
        assert applied.names == [] and watcher.current == NodeConfigChoice("l4", "label")
        assert "specified config 'h100' does not exist; keeping config 'l4'" in caplog.text
        source.set_labels({LABEL: "a100"})
        wait_for(lambda: applied.names == ["a100"], "the switch to a100")
        assert sample(registry, "gpuslice_node_config_refused", wanted="h100", reason="unknown_config") is None
    finally:
        watcher.stop()


def test_a_config_that_fails_to_load_keeps_the_old_one(tmp_path: Path) -> None:
    source = FakeNodeSource({LABEL: "l4"})
    applied = Applied(bad=("a100",))
    watcher, _, registry = start(tmp_path, source, applied)
    try:
        source.set_labels({LABEL: "a100"})
        wait_for(
            lambda: sample(registry, "gpuslice_node_config_refused", wanted="a100", reason="invalid_config") == 1,
            "the refusal",
        )
        assert watcher.current is not None and watcher.current.name == "l4"
        assert sample(registry, "gpuslice_node_config_serving", config="l4", source="label") == 1
    finally:
        watcher.stop()


def test_unreachable_at_start_uses_the_default_then_follows_the_label(tmp_path: Path) -> None:
    source = FakeNodeSource({LABEL: "a100"}, fail_gets=3)
    applied = Applied()
    watcher, first, registry = start(tmp_path, source, applied, default="l4")
    try:
        assert (first.name, first.source) == ("l4", "default")
        wait_for(lambda: applied.names == ["a100"], "the label once the API answers")
        assert source.gets == 4
        assert (sample(registry, "gpuslice_node_config_api_errors_total") or 0) >= 3
    finally:
        watcher.stop()


def test_drops_resume_from_the_last_version_and_expiry_gets_the_node_again(tmp_path: Path) -> None:
    source = FakeNodeSource({LABEL: "a100"}, resource_version=7)
    applied = Applied()
    watcher, _, _ = start(tmp_path, source, applied)
    try:
        wait_for(lambda: source.watches == ["7"], "the first watch")
        source.push(NodeEvent("BOOKMARK", "12"))
        source.push("drop")
        wait_for(lambda: source.watches == ["7", "12"], "the watch resumed after the bookmark")
        source.labels, source.resource_version = {LABEL: "l4"}, 30  # changed while the watch was away
        source.push("expire")
        wait_for(lambda: applied.names == ["l4"], "the label read again after 410 Gone")
        wait_for(lambda: source.watches == ["7", "12", "30"], "the watch from the new version")
        assert source.gets == 2
    finally:
        watcher.stop()


def test_nothing_to_start_with_is_an_error(tmp_path: Path) -> None:
    watcher = NodeConfigWatcher(settings(config_dir(tmp_path, ("a", "b"))), FakeNodeSource({LABEL: "c"}))
    with pytest.raises(NodeConfigError, match="specified config 'c' does not exist; no config was set"):
        watcher.initial_choice()


class Exploding(Applied):
    """An apply callback that fails unexpectedly (a bug) the first `times` times."""

    def __init__(self, times: int) -> None:
        super().__init__()
        self.times = times

    def __call__(self, choice: NodeConfigChoice) -> bool:
        if self.times > 0:
            self.times -= 1
            raise RuntimeError("a bug in the reload")
        return super().__call__(choice)


def test_an_unexpected_error_is_retried_and_never_ends_the_thread(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    source = FakeNodeSource({LABEL: "a100"})
    applied = Exploding(times=1)
    watcher, _, _ = start(tmp_path, source, applied)
    try:
        source.set_labels({LABEL: "l4"})
        wait_for(lambda: applied.names == ["l4"], "the label applied on the retry")
        assert "a bug in the reload" in caplog.text and watcher.alive and source.gets == 2
    finally:
        watcher.stop()


def test_a_dead_thread_shows_as_not_alive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class Fatal(BaseException):
        pass

    class Dying(FakeNodeSource):
        def watch(self, node_name: str, resource_version: str):  # type: ignore[no-untyped-def]
            raise Fatal

    monkeypatch.setattr("threading.excepthook", lambda args: None)  # the death is the point, not noise
    watcher = NodeConfigWatcher(settings(config_dir(tmp_path)), Dying({LABEL: "a100"}))
    assert watcher.alive  # not started: nothing to run
    watcher.initial_choice()
    watcher.start(Applied())
    wait_for(lambda: not watcher.alive, "the thread's death seen")
    watcher.stop()
    assert watcher.alive  # stopped on purpose
