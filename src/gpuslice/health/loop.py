"""The health loop: the backend's health events, through the Xid policy, into the health store (for every front end)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

from gpuslice.discovery import Backend, HealthSource, Prober, XidEvent
from gpuslice.discovery.health_file import HEALTH_FILE_POLL_S, HealthRecord, ProbePassed
from gpuslice.gpu import Node
from gpuslice.health import (
    EventOutcome,
    HealthTracker,
    Mark,
    RecoveryPolicy,
    XidPolicy,
    find_gpu,
)
from gpuslice.sharing import HealthStore

log = logging.getLogger("gpuslice.health")

SOURCE_RETRY_S = 1.0  # a health source that crashed is restarted after this long


class HealthObserver(Protocol):
    """Metrics hooks; cheap and thread-safe."""

    def health_event(self, xid: int, outcome: str) -> None: ...

    def device_recovered(self, physical_id: str) -> None: ...


class _NoObserver:
    def health_event(self, xid: int, outcome: str) -> None:
        pass

    def device_recovered(self, physical_id: str) -> None:
        pass


def recovery_policy_for(prober: Prober | None, enabled: bool) -> RecoveryPolicy:
    """With a prober, its quiet period and interval; without one, recovery lines (events file) are the probe."""
    if prober is not None:
        return RecoveryPolicy(enabled, quiet_s=prober.quiet_s, probe_interval_s=prober.probe_interval_s)
    return RecoveryPolicy(enabled, quiet_s=0.0)


class HealthLoop:
    """Reads the source on thread `gpuslice-health` and applies the tracker's marks to the store.

    Every mark wakes the ListAndWatch streams at once (HealthStore listeners), so a device's new health
    reaches the kubelet within one poll interval plus one message. With a prober and recovery enabled,
    thread `gpuslice-health-probe` re-probes unhealthy devices on the policy's schedule.
    """

    def __init__(
        self,
        store: HealthStore,
        tracker: HealthTracker,
        source: HealthSource | None,
        prober: Prober | None = None,
        observer: HealthObserver | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.tracker = tracker
        self.source = source
        self.prober = prober
        self._observer: HealthObserver = observer or _NoObserver()
        self._clock = clock
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    @property
    def thread_names(self) -> list[str]:
        return [thread.name for thread in self._threads]

    @property
    def alive(self) -> bool:
        """False when a thread that should run has died (the /healthz answer)."""
        return all(thread.is_alive() for thread in self._threads) or self._stop.is_set()

    def start(self) -> None:
        if self._threads:
            return
        log.info("%s; %s", self.tracker.xids.describe(), self.tracker.recovery.describe())
        for note in self.tracker.xids.notes:
            log.warning("%s", note)
        if self.source is None:
            log.info("no health source for this backend: devices stay Healthy")
            return
        if not self.tracker.xids.checks_enabled:
            log.info("health checks disabled: not watching %s", self.source.name)
            return
        self._stop.clear()
        self.source.prime()
        self._spawn("gpuslice-health", self._run_source)
        if self.prober is not None and self.tracker.recovery.enabled:
            self._spawn("gpuslice-health-probe", self._run_prober)

    def stop(self) -> None:
        self._stop.set()
        threads, self._threads = self._threads, []
        for thread in threads:
            thread.join()

    def _spawn(self, name: str, target: Callable[[], None]) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _run_source(self) -> None:
        assert self.source is not None
        while not self._stop.is_set():
            try:
                for record in self.source.records(self._stop):
                    self.handle(record)
            except Exception:
                log.exception("health source %s failed; restarting it in %.0fs", self.source.name, SOURCE_RETRY_S)
                self._stop.wait(SOURCE_RETRY_S)

    def _run_prober(self) -> None:
        assert self.prober is not None
        interval = max(0.05, min(self.tracker.recovery.probe_interval_s, 5.0))
        while not self._stop.wait(interval):
            for device in self.tracker.due_probes(self._clock()):
                found = find_gpu(self.tracker.node, device)
                if found is None:
                    continue
                passed, detail = self.prober.probe(found[0].uuid)
                self._apply_probe(device, passed, detail)

    def handle(self, record: HealthRecord) -> None:
        """Apply one record now (the loop's body; also the entry point for tests and demos)."""
        if isinstance(record, ProbePassed):
            self._apply_probe(record.uuid, True, record.reason or "recovery line")
            return
        self._apply_event(record)

    def _apply_event(self, event: XidEvent) -> None:
        result = self.tracker.on_event(event, self._clock())
        self._observer.health_event(event.xid, result.outcome.value)
        if result.outcome is EventOutcome.IGNORED:
            log.info("Skipping ignored %s", event.describe())
        elif result.outcome is EventOutcome.UNKNOWN_DEVICE:
            log.warning("health event for a device this node does not have, ignored: %s", event.describe())
        elif result.outcome is EventOutcome.MARKED:
            for mark in result.marks:
                log.warning(
                    "XidCriticalError: Xid=%d on Device=%s; marking device as unhealthy.", event.xid, mark.physical_id
                )
            self._apply(result.marks)

    def _apply_probe(self, uuid: str, passed: bool, detail: str) -> None:
        result = self.tracker.on_probe(uuid, passed, self._clock(), detail)
        if result.note:
            log.info("%s", result.note)
        for mark in result.marks:
            log.info("device %s returns to Healthy: %s", mark.physical_id, mark.reason)
            self._observer.device_recovered(mark.physical_id)
        self._apply(result.marks)

    def _apply(self, marks: tuple[Mark, ...]) -> None:
        for mark in marks:
            if mark.healthy:
                self.store.mark_healthy(mark.physical_id, mark.reason)
            else:
                self.store.mark_unhealthy(mark.physical_id, mark.reason)


def build_health_loop(
    backend: Backend,
    node: Node,
    store: HealthStore,
    xids: XidPolicy,
    recovery_enabled: bool,
    observer: HealthObserver | None = None,
    poll_interval_s: float = HEALTH_FILE_POLL_S,
) -> HealthLoop:
    """The health loop for a backend and the node it discovered (the same node the store was built from)."""
    prober = backend.prober()
    tracker = HealthTracker(node, xids, recovery_policy_for(prober, recovery_enabled))
    return HealthLoop(store, tracker, backend.health_source(poll_interval_s), prober, observer)
