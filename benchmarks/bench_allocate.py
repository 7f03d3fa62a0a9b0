"""Allocate round-trip latency through the mock kubelet's channel, beside a bare grpcio server that answers the
same Allocate with a ready-made response on a Unix socket (the floor: gRPC and protobuf alone), for whole
GPUs, time-slicing, MIG and the cdi-cri device list strategy; measured in one run, interleaved."""

from __future__ import annotations

import gc
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from benchmarks.figures import Figure, percentile
from gpuslice.kubelet import MockKubelet
from gpuslice.plugin.app import AppOptions, PluginApp
from gpuslice.plugin.metrics import PluginMetrics
from gpuslice.plugin.naming import socket_name
from gpuslice.plugin.rpc_limits import MAX_STREAMS_PER_RESOURCE
from gpuslice.plugin.server import DEFAULT_WORKERS
from gpuslice.sharing import Resource
from gpuslice.wire import deviceplugin_grpc, deviceplugin_pb2, server_options

ROUNDS = 20
CALLS_PER_ROUND = 200  # pairs: one call to each side, back to back
WARMUP = 300
ADMISSIONS = 200
GOAL = 1.1
MIG_NODE = """\
name: bench-mig
gpus:
  - model: NVIDIA H100 80GB HBM3
    count: 2
    memory_mib: 81559
    compute_capability: "9.0"
    mig: [1g.10gb, 1g.10gb, 3g.40gb]
"""


@dataclass(frozen=True)
class Mode:
    name: str
    node_spec: str  # preset:NAME or the node spec YAML text
    config: str
    resource: str


MODES = (
    Mode("whole GPUs", "preset:h100x4", "version: v1\n", "nvidia.com/gpu"),
    Mode(
        "time-slicing x4",
        "preset:h100x4",
        "version: v1\nsharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: 4}]}}\n",
        "nvidia.com/gpu",
    ),
    Mode("MIG (mixed)", MIG_NODE, "version: v1\nflags: {migStrategy: mixed}\n", "nvidia.com/mig-1g.10gb"),
    Mode("cdi-cri", "preset:h100x4", "version: v1\nflags: {plugin: {deviceListStrategy: cdi-cri}}\n", "nvidia.com/gpu"),
)


def _timed(call: Callable[[], Any], count: int, into: list[float]) -> None:
    clock = time.perf_counter
    for _ in range(count):
        started = clock()
        call()
        into.append(clock() - started)


def _alternated(
    first: Callable[[], Any], second: Callable[[], Any], count: int, into: tuple[list[float], list[float]]
) -> None:
    """`count` pairs of calls, `first` then `second`, each call timed into its own list."""
    clock = time.perf_counter
    first_s, second_s = into
    for _ in range(count):
        started = clock()
        first()
        middle = clock()
        second()
        first_s.append(middle - started)
        second_s.append(clock() - middle)


class FixedAnswer(deviceplugin_grpc.DevicePluginServicer):  # type: ignore[misc]
    """The floor: a servicer that answers every Allocate with one prepared response."""

    def __init__(self, response: deviceplugin_pb2.AllocateResponse) -> None:
        self.response = response

    def Allocate(self, request: deviceplugin_pb2.AllocateRequest, context: Any) -> Any:  # noqa: N802
        return self.response


def _floor_server(path: Path, response: deviceplugin_pb2.AllocateResponse) -> tuple[Any, ThreadPoolExecutor]:
    # the plugin's pool size and server options (its request size cap), so that only the handler differs
    executor = ThreadPoolExecutor(
        max_workers=DEFAULT_WORKERS + MAX_STREAMS_PER_RESOURCE, thread_name_prefix="bench-floor"
    )
    server = grpc.server(executor, options=server_options())
    deviceplugin_grpc.add_DevicePluginServicer_to_server(FixedAnswer(response), server)  # type: ignore[no-untyped-call]
    server.add_insecure_port(f"unix:{path}")
    server.start()
    return server, executor


class HandlerTimes(PluginMetrics):
    """The plugin's own metrics observer, also keeping the time spent inside its Allocate handler."""

    def __init__(self) -> None:
        super().__init__()
        self.seconds: list[float] = []

    def allocated(self, resource: str, containers: int, seconds: float) -> None:
        super().allocated(resource, containers, seconds)
        self.seconds.append(seconds)


@dataclass(frozen=True)
class Measured:
    mode: Mode
    devices: int
    ours: list[float]
    floor: list[float]
    inside: list[float]
    admissions: list[float]

    def p50_ratio(self) -> float:
        return percentile(self.ours, 0.5) / percentile(self.floor, 0.5)


@contextmanager
def served_plugin(mode: Mode, workdir: Path, observer: PluginMetrics) -> Iterator[tuple[MockKubelet, Resource]]:
    """The real PluginApp for `mode` against the mock kubelet, in this process, registered and allocatable;
    yields the kubelet and the plugin's resource `mode.resource` (its socket: `app_socket`)."""
    node_spec = mode.node_spec
    if not node_spec.startswith("preset:"):
        (workdir / "node.yaml").write_text(node_spec)
        node_spec = str(workdir / "node.yaml")
    (workdir / "config.yaml").write_text(mode.config)
    options = AppOptions(
        backend="fake",
        node_spec=node_spec,
        config_file=str(workdir / "config.yaml"),
        kubelet_socket=str(workdir / "kubelet" / "kubelet.sock"),
        pod_resources_socket=str(workdir / "pr.sock"),
        cdi_spec_dir=str(workdir / "cdi"),
    )
    with (
        MockKubelet(workdir / "kubelet", checkpoint_enabled=False) as kubelet,
        PluginApp(options, metrics=observer) as app,
    ):
        resource = next(r for r in app.plan.resources if r.name == mode.resource)
        if not kubelet.wait_for(resource=resource.name, allocatable=len(resource.devices), timeout=10):
            raise RuntimeError(f"{mode.name}: the plugin never registered")
        yield kubelet, resource


def _measure(mode: Mode, workdir: Path) -> Measured:
    observer = HandlerTimes()
    with served_plugin(mode, workdir, observer) as (kubelet, resource):
        device = resource.devices[min(5, len(resource.devices) - 1)]
        request = deviceplugin_pb2.AllocateRequest(
            container_requests=[deviceplugin_pb2.ContainerAllocateRequest(devices_ids=[device.id])]
        )
        # each side gets its own channel, dialled the same way (the kubelet's also carries ListAndWatch)
        plugin_channel = grpc.insecure_channel(f"unix:{app_socket(kubelet, resource.name)}")
        stub = deviceplugin_grpc.DevicePluginStub(plugin_channel)  # type: ignore[no-untyped-call]
        answer = stub.Allocate(request)
        floor_server, floor_executor = _floor_server(workdir / "floor.sock", answer)
        floor_channel = grpc.insecure_channel(f"unix:{workdir / 'floor.sock'}")
        floor_stub = deviceplugin_grpc.DevicePluginStub(floor_channel)  # type: ignore[no-untyped-call]
        try:
            if floor_stub.Allocate(request) != answer:
                raise RuntimeError(f"{mode.name}: the floor does not give the plugin's answer")

            def ours() -> None:
                stub.Allocate(request)

            def floor() -> None:
                floor_stub.Allocate(request)

            ours_s: list[float] = []
            floor_s: list[float] = []
            _timed(ours, WARMUP, [])
            _timed(floor, WARMUP, [])
            observer.seconds.clear()
            # Call by call, so that a change of machine load hits both sides alike; which side goes first
            # changes every round, so that neither always follows the other's leftover work.
            for number in range(ROUNDS):
                gc.collect()
                gc.disable()  # as timeit does: a collection landing in one side's round is noise, not cost
                try:
                    if number % 2:
                        _alternated(floor, ours, CALLS_PER_ROUND, (floor_s, ours_s))
                    else:
                        _alternated(ours, floor, CALLS_PER_ROUND, (ours_s, floor_s))
                finally:
                    gc.enable()
            inside = list(observer.seconds)
            admissions: list[float] = []
            for n in range(ADMISSIONS):
                started = time.perf_counter()
                kubelet.admit_one(f"bench-{n}", resource.name)
                admissions.append(time.perf_counter() - started)
                kubelet.delete_pod(f"bench-{n}")
        finally:
            plugin_channel.close()
            floor_channel.close()
            floor_server.stop(0).wait()
            floor_executor.shutdown(wait=True)
    return Measured(mode, len(resource.devices), ours_s, floor_s, inside, admissions)


def app_socket(kubelet: MockKubelet, resource: str) -> Path:
    """The plugin's socket for `resource` (beside the kubelet's, where it registered it)."""
    return kubelet.device_plugin_dir / socket_name(resource)


def _us(samples: list[float], fraction: float) -> float:
    return percentile(samples, fraction) * 1e6


def main() -> list[Figure]:
    logging.getLogger("gpuslice.kubelet").setLevel(logging.ERROR)  # each stop logs an ended stream: expected here
    root = Path(tempfile.mkdtemp(prefix="gs", dir="/tmp"))  # short: Unix socket paths stay under 107 bytes
    results = []
    try:
        for number, mode in enumerate(MODES):
            workdir = root / str(number)
            workdir.mkdir()
            results.append(_measure(mode, workdir))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    load = os.getloadavg()[0]
    print(
        f"{ROUNDS} rounds of {CALLS_PER_ROUND} call pairs (ours and the floor's, alternated call by call); "
        f"{os.cpu_count()} CPUs, load {load:.2f}"
    )
    print("floor: a bare grpcio server (the plugin's pool size and options) answering with the plugin's response")
    header = f"{'mode':<18}{'devices':>8}{'ours p50':>10}{'floor p50':>10}{'ratio':>7}{'ours p99':>10}"
    print(f"{header}{'floor p99':>10}{'handler p50':>12}{'admission p50':>14}  (us)")
    for r in results:
        print(
            f"{r.mode.name:<18}{r.devices:>8}{_us(r.ours, 0.5):>10.1f}{_us(r.floor, 0.5):>10.1f}{r.p50_ratio():>7.2f}"
            f"{_us(r.ours, 0.99):>10.1f}{_us(r.floor, 0.99):>10.1f}{_us(r.inside, 0.5):>12.1f}"
            f"{_us(r.admissions, 0.5):>14.1f}"
        )
    return [
        Figure(f"Allocate p50 / bare grpcio floor, {r.mode.name}", r.p50_ratio(), "x", GOAL, note="same run")
        for r in results
    ]


if __name__ == "__main__":
    main()
