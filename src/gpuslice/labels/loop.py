"""The labeller's lifecycle: label once or every sleepInterval, reload on request (SIGHUP), withdraw on exit."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from gpuslice.config import Config
from gpuslice.gpu import Node
from gpuslice.labels.compute import compute_label_set
from gpuslice.labels.sinks import LabelSink
from gpuslice.records import record

log = logging.getLogger(__name__)


@record
class LabellerSettings:
    """Everything one labelling pass needs; rebuilt from files, environment and flags on every reload."""

    config: Config
    discover: Callable[[], Node]
    sink: LabelSink
    machine_type: str | None = None  # None: the machine type the backend reports
    warnings: tuple[str, ...] = ()  # met while loading (config keys ignored, ...)
    close: Callable[[], None] | None = None  # releases the backend (NVML) when these settings are replaced


class LoopControl:
    """Stop and reload requests (from signal handlers or tests) and the interruptible wait between passes."""

    def __init__(self) -> None:
        self._wake = threading.Event()
        self._stop = False
        self._reload = False

    def request_stop(self) -> None:
        self._stop = True
        self._wake.set()

    def request_reload(self) -> None:
        self._reload = True
        self._wake.set()

    @property
    def stop_requested(self) -> bool:
        return self._stop

    def take_reload(self) -> bool:
        """True once per reload request."""
        wanted, self._reload = self._reload, False
        return wanted

    def wait(self, timeout: float | None) -> None:
        """Sleep `timeout` seconds (None: until a request) or until stop/reload is requested."""
        if not (self._stop or self._reload):
            self._wake.wait(timeout)
        self._wake.clear()


class Labeller:
    """Runs labelling passes; logs each distinct set of warnings once instead of every interval."""

    def __init__(self, load: Callable[[], LabellerSettings], clock: Callable[[], float] = time.time) -> None:
        self.load = load
        self.clock = clock
        self.settings = load()
        self.timestamp = int(clock())  # gfd.timestamp: set at start and on reload, stable across passes
        self.passes = 0
        self.failures = 0
        self._logged: tuple[str, ...] = ()
        self._log_warnings(self.settings.warnings)

    def label_once(self) -> bool:
        """One pass: discover, compute, write. A failure is logged and reported, never raised."""
        self.passes += 1
        settings = self.settings
        try:
            node = settings.discover()
            result = compute_label_set(node, settings.config, self.timestamp, machine_type=settings.machine_type)
            self._log_warnings(result.warnings)
            settings.sink.write(result.labels)
        except Exception as exc:  # a periodic labeller outlives one bad pass (NVML hiccup, API server down)
            self.failures += 1
            log.error("labelling failed (%s): %s", settings.sink.description, exc)
            return False
        log.info("wrote %d labels to %s", len(result.labels), settings.sink.description)
        return True

    def reload(self) -> None:
        """Rebuild the settings (config file, node spec, sink); keep the old ones if the new ones are bad."""
        try:
            settings = self.load()
        except Exception as exc:  # a bad edit to the config must not take the labels down
            log.error("reload failed, keeping the previous configuration: %s", exc)
            return
        previous, self.settings = self.settings, settings
        _close(previous)
        self.timestamp = int(self.clock())
        self._logged = ()
        self._log_warnings(settings.warnings)
        log.info("configuration reloaded")

    def run(self, control: LoopControl) -> int:
        """Label until stopped (or once with oneshot); returns the exit status."""
        try:
            while True:
                ok = self.label_once()
                gfd = self.settings.config.flags.gfd
                if gfd.oneshot:
                    return 0 if ok else 1
                control.wait(gfd.sleep_interval)
                if control.stop_requested:
                    break
                if control.take_reload():
                    self.reload()
            # GFD removes its features file when a periodic labeller exits, so stale labels do not outlive it;
            # with an infinite interval the labels are meant to stay (the sink decides what "withdraw" means).
            if self.settings.config.flags.gfd.sleep_interval is not None:
                self.settings.sink.withdraw()
            return 0
        finally:
            _close(self.settings)

    def _log_warnings(self, warnings: tuple[str, ...]) -> None:
        if warnings != self._logged:
            for warning in warnings:
                log.warning("%s", warning)
            self._logged = warnings


def _close(settings: LabellerSettings) -> None:
    if settings.close is not None:
        try:
            settings.close()
        except Exception as exc:  # releasing a backend must not turn a clean exit or reload into a failure
            log.warning("closing the backend failed: %s", exc)
