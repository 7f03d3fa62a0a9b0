"""/healthz checks the serving path: a gRPC server that cannot answer within the deadline fails the probe."""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from gpuslice.allocation import AllocateOptions, WholeGpuRule
from gpuslice.config import parse_config_text
from gpuslice.discovery import load_node_spec
from gpuslice.plugin import PluginManager
from gpuslice.plugin.lifecycle import PluginRuntime
from gpuslice.plugin.manager import ServiceFactory
from gpuslice.plugin.rpc_limits import MAX_STREAMS_PER_RESOURCE
from gpuslice.plugin.service import PluginObserver, ResourceService
from gpuslice.sharing import HealthStore, Resource, build_resources
from tests.plugin.rpc import PluginClient, allocate_request

WORKERS = 2


class WedgingServices:
    """A PluginExtension whose services' Allocate waits on `gate`: closing it wedges every worker it reaches."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.gate.set()
        self.waiting = 0
        self._lock = threading.Lock()

    def wait_for_waiters(self, count: int) -> bool:
        deadline = time.monotonic() + 10
        while self.waiting < count and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.waiting >= count

    def start(self) -> object:
        return None

    def stop(self) -> None:
        self.gate.set()

    @property
    def service_for(self) -> ServiceFactory:
        extension = self

        class Wedging(ResourceService):
            def Allocate(self, request: Any, context: Any) -> Any:
                with extension._lock:
                    extension.waiting += 1
                extension.gate.wait()
                return super().Allocate(request, context)

        def build(
            resource: Resource,
            health: HealthStore,
            options: AllocateOptions | None,
            rule: WholeGpuRule | None,
            observer: PluginObserver | None,
        ) -> ResourceService:
            return Wedging(resource, health, options, rule, observer)

        return build


def healthz(runtime: PluginRuntime) -> tuple[int, str]:
    assert runtime.metrics_server is not None
    url = f"http://127.0.0.1:{runtime.metrics_server.port}/healthz"
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_healthz_fails_while_the_grpc_workers_are_wedged_and_recovers(workdir: Path) -> None:
    node = load_node_spec("preset:h100x4").node
    plan = build_resources(node, parse_config_text("").config)
    wedging = WedgingServices()
    manager = PluginManager(plan, HealthStore(node), None, socket_dir=workdir, workers=WORKERS, extension=wedging)
    runtime = PluginRuntime(manager, metrics_port=0, metrics_address="127.0.0.1")
    runtime.start()
    try:
        assert healthz(runtime) == (200, "ok\n")
        (server,) = manager.servers
        with PluginClient(server.socket_path) as client:
            wedging.gate.clear()
            device = plan.resources[0].devices[0].id
            pool = WORKERS + MAX_STREAMS_PER_RESOURCE  # unused stream slots serve unary calls too
            stuck = [client.stub.Allocate.future(allocate_request([device]), timeout=30) for _ in range(pool)]
            assert wedging.wait_for_waiters(pool)
            status, why = healthz(runtime)
            assert status == 503 and "did not answer a call within 1 s (DEADLINE_EXCEEDED)" in why
            wedging.gate.set()
            for call in stuck:
                assert call.result().container_responses
        assert healthz(runtime) == (200, "ok\n")
    finally:
        wedging.gate.set()
        runtime.stop()
