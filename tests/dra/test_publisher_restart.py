"""A ResourceSlice publisher thread that dies is started again by the app (the GPUs must not vanish for good)."""

from __future__ import annotations

import threading
import time

import pytest

from gpuslice.dra import DraSettings, InMemoryResourceApi, prepare_setup
from gpuslice.dra.app import DraApp
from gpuslice.dra.publish import SliceController
from gpuslice.mps import FakeMpsControl
from tests.dra.support import NODE_SPEC
from tests.support.dirs import short_temp_dir


class Fatal(BaseException):
    """What no per-attempt handler catches (as a bug in the interpreter's own machinery would not be)."""


def test_a_dead_publisher_is_restarted(monkeypatch: pytest.MonkeyPatch) -> None:
    attempts = []
    original = SliceController._attempt

    def dies_once(self: SliceController) -> bool:
        attempts.append(threading.current_thread().name)
        if len(attempts) == 1:
            raise Fatal
        return original(self)

    monkeypatch.setattr(SliceController, "_attempt", dies_once)
    monkeypatch.setattr("threading.excepthook", lambda args: None)  # the death is the point
    with short_temp_dir("gs") as root:
        spec = root / "node.yaml"
        spec.write_text(NODE_SPEC)
        config = root / "config.yaml"
        config.write_text("version: v1\n")
        setup = prepare_setup("fake", str(spec), str(config))
        settings = DraSettings(
            plugins_dir=root / "p", registry_dir=root / "r", cdi_dir=root / "cdi", socket_check_s=0.05
        )
        api = InMemoryResourceApi()
        app = DraApp(setup, settings, api, mps_control=FakeMpsControl())
        app.start()
        try:
            deadline = time.monotonic() + 20
            while not api.slices:
                assert time.monotonic() < deadline, f"never published (attempts: {attempts})"
                time.sleep(0.02)
            assert len(attempts) >= 2 and app.plugin.slices is not None and app.plugin.slices.alive
        finally:
            app.stop()
