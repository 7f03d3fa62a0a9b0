"""Learn dynamic-MIG releases from the kubelet's pod-resources List; free what no pod lists any more."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc

from gpuslice.plugin.dynamic_settings import ADMISSION_GRACE_S, RELEASE_POLL_S
from gpuslice.sharing.dynamic import DynamicMig, Holding, InUse
from gpuslice.wire import podresources_grpc, podresources_pb2

log = logging.getLogger("gpuslice.plugin.dynamic_mig")

LIST_TIMEOUT_S = 5.0


class PodResourcesUnavailable(RuntimeError):
    """The pod-resources List call failed; the message names the socket and the gRPC status."""


class PodResourcesClient:
    """A pod-resources v1 client on a Unix socket; `list_in_use` is a Lister for DynamicMig and the watcher."""

    def __init__(self, socket_path: str | Path, timeout_s: float = LIST_TIMEOUT_S) -> None:
        self.socket_path = Path(socket_path)
        self.timeout_s = timeout_s
        self._channel: Any = None
        self._lock = threading.Lock()

    def _stub(self) -> Any:
        with self._lock:
            if self._channel is None:
                self._channel = grpc.insecure_channel(f"unix:{self.socket_path}")
            return podresources_grpc.PodResourcesListerStub(self._channel)  # type: ignore[no-untyped-call]

    def list_in_use(self) -> InUse:
        """Resource name -> every device ID any pod container holds now."""
        try:
            response = self._stub().List(podresources_pb2.ListPodResourcesRequest(), timeout=self.timeout_s)
        except grpc.RpcError as exc:
            code = exc.code().name if exc.code() is not None else "UNKNOWN"
            raise PodResourcesUnavailable(f"pod-resources List on {self.socket_path} failed ({code}): "
                                          f"{exc.details()}") from exc  # fmt: skip
        in_use: dict[str, set[str]] = {}
        for pod in response.pod_resources:
            for container in pod.containers:
                for devices in container.devices:
                    in_use.setdefault(devices.resource_name, set()).update(devices.device_ids)
        return in_use

    def close(self) -> None:
        with self._lock:
            channel, self._channel = self._channel, None
        if channel is not None:
            channel.close()


class ReleaseWatcher:
    """Polls pod-resources while placements are held and frees those no pod lists any more.

    A placement counts as released once it was listed and then is not (`seen`), or when it was never
    listed for ADMISSION_GRACE_S. With nothing held the thread sleeps until the next claim wakes it.
    """

    def __init__(
        self,
        dynamic: DynamicMig,
        lister: Callable[[], InUse],
        interval_s: float = RELEASE_POLL_S,
        grace_s: float = ADMISSION_GRACE_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.dynamic = dynamic
        self.lister = lister
        self.interval_s = interval_s
        self.grace_s = grace_s
        self.clock = clock
        self.polls = 0
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._remove_listener: Callable[[], None] | None = None
        self._failing = False

    def poll_once(self) -> tuple[Holding, ...]:
        """One List; frees what it shows released. Raises PodResourcesUnavailable (nothing is freed then)."""
        geometry = self.dynamic.geometry
        holdings = geometry.holdings()  # before List: anything claimed later is judged next time
        if not holdings:
            return ()
        in_use = self.lister()
        self.polls += 1
        listed = {i for name in geometry.resource_names for i in in_use.get(name, ())}
        if geometry.mark_seen(h.slot_id for h in holdings if h.slot_id in listed):
            self.dynamic.save_quietly()  # a restart must know these are listed: their absence then means release
        now = self.clock()
        gone = [h for h in holdings if h.slot_id not in listed and (h.seen or now - h.since >= self.grace_s)]
        if not gone:
            return ()
        for holding in gone:
            why = "its pod is gone" if holding.seen else f"no pod listed it within {self.grace_s:g} s"
            log.info("pod-resources: %s is no longer in use (%s)", holding.slot_id, why)
        return self.dynamic.free(gone)

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._remove_listener = self.dynamic.geometry.add_listener(self._wake.set)
        self._thread = threading.Thread(target=self._run, name="gpuslice-pod-resources-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread and wait for it. Idempotent."""
        self._stop.set()
        self._wake.set()
        if self._remove_listener is not None:
            self._remove_listener()
            self._remove_listener = None
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            if self.dynamic.geometry.held_count == 0:
                self._wake.wait()  # a claim (geometry change) or stop() wakes us
                self._wake.clear()
                continue
            try:
                self.poll_once()
                if self._failing:
                    log.info("pod-resources is answering again")
                self._failing = False
            except PodResourcesUnavailable as exc:
                if not self._failing:  # say it once per outage, not twice a second
                    log.warning("%s; placements stay held until it answers", exc)
                self._failing = True
            except Exception:  # the watcher must outlive any single bad poll
                log.exception("pod-resources poll failed")
            self._stop.wait(self.interval_s)
