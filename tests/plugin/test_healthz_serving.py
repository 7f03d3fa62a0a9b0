"""/healthz checks the serving path: a gRPC server that cannot answer within the deadline fails the probe."""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from gpuslice.allocation import AllocationAnswer, StaticAllocator
from gpuslice.plugin.app import PluginApp
from tests.plugin.rpc import PluginClient, allocate_request
from tests.support.plugin import build_app

WORKERS = 2


class WedgingAllocator(StaticAllocator):
    """A StaticAllocator whose allocate waits on `gate`: closing it wedges every worker an Allocate reaches."""

    gate = threading.Event()
    waiting = 0
    lock = threading.Lock()

    def allocate(self, requests: Sequence[Sequence[str]]) -> AllocationAnswer:
        with WedgingAllocator.lock:
            WedgingAllocator.waiting += 1
        WedgingAllocator.gate.wait()
        return super().allocate(requests)


def wait_for_waiters(count: int) -> bool:
    deadline = time.monotonic() + 10
    while WedgingAllocator.waiting < count and time.monotonic() < deadline:
        time.sleep(0.01)
    return WedgingAllocator.waiting >= count


def healthz(app: PluginApp) -> tuple[int, str]:
    assert app.runtime.metrics_server is not None
    url = f"http://127.0.0.1:{app.runtime.metrics_server.port}/healthz"
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_healthz_fails_while_the_grpc_workers_are_wedged_and_recovers(workdir: Path) -> None:
    WedgingAllocator.gate.set()
    app = build_app(
        workdir, workers=WORKERS, metrics_port=0, metrics_address="127.0.0.1", allocator_factory=WedgingAllocator
    )
    app.start()
    try:
        assert healthz(app) == (200, "ok\n")
        (server,) = app.manager.servers
        assert isinstance(server.service.allocator, WedgingAllocator)
        with PluginClient(server.socket_path) as client:
            WedgingAllocator.gate.clear()
            device = app.plan.resources[0].devices[0].id
            pool = server.max_workers  # unused stream threads serve unary calls too
            stuck = [client.stub.Allocate.future(allocate_request([device]), timeout=30) for _ in range(pool)]
            assert wait_for_waiters(pool)
            status, why = healthz(app)
            assert status == 503 and "did not answer a call within 1 s (DEADLINE_EXCEEDED)" in why
            WedgingAllocator.gate.set()
            for call in stuck:
                assert call.result().container_responses
        assert healthz(app) == (200, "ok\n")
    finally:
        WedgingAllocator.gate.set()
        app.stop()
