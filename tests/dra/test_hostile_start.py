"""`gpuslice dra` with odd things at its checkpoint path starts, registers and serves: never a hang or crash loop."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gpuslice.kubelet.dra_mock import MockDraKubelet
from tests.dra.support import DRIVER, NODE, Node, claim, device_classes, start_plugin
from tests.support.dirs import short_temp_dir
from tests.support.process import finish, reap


def _directory(path: Path) -> None:
    path.mkdir()
    (path / "inside").write_text("x")


def _fifo(path: Path) -> None:
    os.mkfifo(path)  # a blocking open() would wait for a writer for ever


def _link_loop(path: Path) -> None:
    path.symlink_to(path.name)


@pytest.fixture
def setup() -> Iterator[tuple[Node, MockDraKubelet]]:
    with short_temp_dir("gs") as root:
        kubelet = MockDraKubelet(root, NODE).start()
        for device_class in device_classes():
            kubelet.add_device_class(device_class)
        try:
            yield Node(root), kubelet
        finally:
            kubelet.stop()


@pytest.mark.parametrize("make", [_directory, _fifo, _link_loop], ids=["directory", "fifo", "symlink-loop"])
def test_an_odd_checkpoint_is_set_aside_and_the_plugin_serves(
    setup: tuple[Node, MockDraKubelet], make: Callable[[Path], None]
) -> None:
    node, kubelet = setup
    checkpoint = kubelet.plugins_dir / DRIVER / "checkpoint.json"
    checkpoint.parent.mkdir(parents=True, exist_ok=True)
    make(checkpoint)
    process = start_plugin(node, kubelet)
    try:
        assert kubelet.watcher.wait_registered(DRIVER, timeout=20), "registered despite the odd checkpoint"
        assert kubelet.wait_for_slices(DRIVER, min_devices=30)
        assert os.path.lexists(checkpoint.with_name("checkpoint.json.corrupt"))
        kubelet.create_claim(claim("after"))
        assert kubelet.admit("pod-after", ["after"]).cdi_ids, "a claim is prepared and checkpointed again"
        assert checkpoint.is_file() and not checkpoint.is_symlink()
        assert kubelet.delete_pod("pod-after") == {}
        code, err = finish(process, signal.SIGTERM)
        assert code == 0, err[-2000:]
        assert "Traceback" not in err and err.count("cannot be trusted") == 1
    finally:
        reap(process)
