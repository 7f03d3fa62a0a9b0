"""The main-thread loop of a node process: start, wait for a stop signal (others run callbacks), stop."""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Callable, Mapping, Sequence
from types import FrameType
from typing import Protocol

log = logging.getLogger("gpuslice")

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT)


class Startable(Protocol):
    """What run_until_signalled runs: a plugin or DRA app, or a bare runtime."""

    def start(self) -> None: ...

    def stop(self) -> None: ...


def run_until_signalled(
    runtime: Startable,
    ready: Callable[[], None] | None = None,
    handlers: Mapping[signal.Signals, Callable[[], None]] | None = None,
    stop_signals: Sequence[signal.Signals] = STOP_SIGNALS,
) -> signal.Signals:
    """Start, wait for one of `stop_signals`, stop; returns the signal. Must run on the main thread.

    `handlers` adds signals that run a callback on this thread and keep running (SIGHUP reload, for one).
    Signals arrive through a wakeup pipe, not through an Event set in the handler: a handler runs on the
    main thread between bytecodes, and setting an Event there deadlocks if the main thread holds the
    Event's lock at that moment.
    """
    extra = dict(handlers or {})
    watched = (*stop_signals, *extra)
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    previous_fd = signal.set_wakeup_fd(write_fd)
    previous = {sig: signal.signal(sig, _note_signal) for sig in watched}
    try:
        runtime.start()
        if ready is not None:
            ready()
        while True:
            for number in os.read(read_fd, 64):
                sig = signal.Signals(number)
                if sig in extra:
                    log.info("received %s", sig.name)
                    extra[sig]()
                elif sig in stop_signals:
                    log.info("received %s, shutting down", sig.name)
                    return sig
    finally:
        runtime.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        signal.set_wakeup_fd(previous_fd)
        os.close(read_fd)
        os.close(write_fd)


def _note_signal(signum: int, frame: FrameType | None) -> None:
    """Nothing to do here: the signal number reaches the main loop through the wakeup pipe."""
