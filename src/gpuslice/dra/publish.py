"""Keeps the node's pool published: republish with a bumped generation on change, re-create what was wiped."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from gpuslice.dra.api import ApiError, ResourceApi
from gpuslice.dra.counters import CounterSupport
from gpuslice.dra.devices import DraDevice
from gpuslice.dra.slices import PoolSpec, build_slices

log = logging.getLogger("gpuslice.dra")

DEFAULT_RESYNC_S = 10.0
MIN_SYNC_INTERVAL_S = 1.0  # pokes (health flaps, re-registrations) never sync faster than this
STOP_WAIT_S = 0.2  # the thread is a daemon; a request it is blocked in ends when the client closes


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _name(obj: Mapping[str, Any]) -> str | None:
    name = _mapping(obj.get("metadata")).get("name")
    return name if isinstance(name, str) and name else None


def _generation(obj: Mapping[str, Any]) -> int:
    generation = _mapping(_mapping(obj.get("spec")).get("pool")).get("generation", 0)
    return generation if isinstance(generation, int) and not isinstance(generation, bool) else 0


def _content(obj: Mapping[str, Any]) -> Any:
    """What a slice says, apart from its generation (which we bump) and server-set fields."""
    spec = dict(_mapping(obj.get("spec")))
    spec["devices"] = spec.get("devices") or []  # a server may return an absent list as empty, or drop it
    pool = dict(_mapping(spec.get("pool")))
    pool.pop("generation", None)
    spec["pool"] = pool
    return obj.get("apiVersion"), _name(obj), spec


class SliceController:
    """Publishes `devices()` as the pool's slices. `sync()` is idempotent and cheap when nothing changed.

    The generation only grows: it starts above the highest one found on the server, so a restarted
    plugin never publishes a generation the scheduler would ignore as older. The thread survives every
    failed attempt (an API error, a malformed answer, a bug): it logs, waits its RetryBackoff (1 s doubling to
    30 s) and tries again; a success waits the resync interval. `alive` says whether it still runs.
    """

    def __init__(
        self,
        api: ResourceApi,
        pool: PoolSpec | Callable[[], PoolSpec],
        devices: Callable[[], Sequence[DraDevice]],
        resync_s: float = DEFAULT_RESYNC_S,
    ) -> None:
        self.api = api
        # A callable is asked on first use (it may need the API server, which may not be up yet).
        self._pool: PoolSpec | None = pool if isinstance(pool, PoolSpec) else None
        self._resolve_pool = None if isinstance(pool, PoolSpec) else pool
        self.devices = devices
        self.resync_s = resync_s
        self.generation = 0
        self.written: list[dict[str, Any]] = []  # the slices of the last publish
        self.publishes = 0
        self.counters = CounterSupport()  # whether the server keeps shared counters (dra.counters)
        self._lock = threading.RLock()
        self._wake = threading.Event()
        self._synced = threading.Event()  # set once a sync has completed
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def pool(self) -> PoolSpec:
        if self._pool is None:
            assert self._resolve_pool is not None
            self._pool = self._resolve_pool()
        return self._pool

    def sync(self) -> bool:
        """Make the server's slices match the devices; True when something was written."""
        with self._lock:
            self.counters.probe(self.api, self.pool, self.devices())
            wrote = self._publish()
            if wrote and self.counters.observe(
                self.written, self.api.list_slices(self.pool.driver, self.pool.node_name)
            ):
                self._publish()  # at once: the placements just written overlap, and nothing guards them
            return wrote

    def _publish(self) -> bool:
        with self._lock:
            listed = self.api.list_slices(self.pool.driver, self.pool.node_name)
            existing = {name: obj for obj in listed if (name := _name(obj)) is not None}
            seen = max((_generation(obj) for obj in existing.values()), default=0)
            wanted = build_slices(self.pool, self.counters.offered(self.devices()), max(self.generation, 1))
            same = len(existing) == len(wanted) and all(
                obj["metadata"]["name"] in existing and _content(existing[obj["metadata"]["name"]]) == _content(obj)
                for obj in wanted
            )
            if same and seen == self.generation:
                return False
            self.generation = max(self.generation, seen) + 1
            wanted = build_slices(self.pool, self.counters.offered(self.devices()), self.generation)
            try:
                for obj in wanted:
                    self.api.apply_slice(obj)
            except ApiError as exc:
                if not self._needs_split(exc):
                    raise
                # A 1.35+ API server: counter sets go in slices of their own. Start over in that layout.
                log.info("the API server wants counter sets apart from devices; publishing them split")
                self._pool = replace(self.pool, counter_layout="split")
                wanted = build_slices(self.pool, self.counters.offered(self.devices()), self.generation)
                for obj in wanted:
                    self.api.apply_slice(obj)
            names = {obj["metadata"]["name"] for obj in wanted}
            for name in existing:
                if name not in names:
                    self.api.delete_slice(name)
            self.publishes += 1
            self.written = wanted
            count = sum(len(obj["spec"].get("devices") or ()) for obj in wanted)
            log.info("published pool %s generation %d: %d slice(s), %d device(s)",
                     self.pool.node_name, self.generation, len(wanted), count)  # fmt: skip
            return True

    def _needs_split(self, exc: ApiError) -> bool:
        return exc.status == 422 and "sharedCounters" in str(exc) and self.pool.counter_layout == "combined"

    def delete_all(self) -> None:
        """Remove every slice of our pool (clean shutdown: the devices are no longer offered)."""
        with self._lock:
            if self._pool is None:
                return  # never resolved, so never published
            for obj in self.api.list_slices(self.pool.driver, self.pool.node_name):
                name = _name(obj)
                if name is not None:
                    self.api.delete_slice(name)
            log.info("deleted the ResourceSlices of pool %s", self.pool.node_name)

    def poke(self) -> None:
        """Ask the loop to sync now (a device changed health, the kubelet registered us again)."""
        self._wake.set()

    def start(self, first_wait_s: float = 0.0) -> None:
        """Start the publishing thread; its first sync waits up to `first_wait_s` for a poke (or a stop)."""
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, args=(first_wait_s,), name="dra-slices", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=STOP_WAIT_S)
            self._thread = None

    @property
    def alive(self) -> bool:
        """False when the publishing thread should run and does not (the /healthz answer)."""
        return self._stop.is_set() or (self._thread is not None and self._thread.is_alive())

    def _run(self, first_wait_s: float) -> None:
        if first_wait_s > 0 and self._wake.wait(first_wait_s):
            self._wake.clear()  # this sync answers the poke
        # Loaded here, on the first sync: gpuslice.kube (its client, counters and dataclasses) is the API's.
        from gpuslice.kube import RetryBackoff

        backoff = RetryBackoff()
        while not self._stop.is_set():
            started = time.monotonic()
            if self._attempt():
                backoff.success()
                self._wake.wait(self.resync_s)
            else:
                delay = backoff.failure()
                log.info("next ResourceSlice sync in %.1f s", delay)
                self._stop.wait(delay)  # a poke does not cut a backoff short
            self._wake.clear()
            self._stop.wait(max(0.0, started + MIN_SYNC_INTERVAL_S - time.monotonic()))

    def wait_synced(self, timeout_s: float) -> bool:
        """True once a sync has completed (the start does not wait for one: tests and the demo may)."""
        return self._synced.wait(timeout_s)

    def _attempt(self) -> bool:
        try:
            self.sync()
        except (ApiError, OSError) as exc:
            log.warning("publishing ResourceSlices failed: %s", exc)
            return False
        except Exception:  # a malformed answer or a bug: publishing must go on, or the GPUs vanish for good
            log.exception("publishing ResourceSlices failed unexpectedly")
            return False
        self._synced.set()
        return True
