"""Allocate round-trip latency through the mock kubelet, beside a bare grpcio unary echo on a Unix socket."""

from __future__ import annotations

import gc
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc

from gpuslice.config import parse_config_text
from gpuslice.discovery import load_node_spec
from gpuslice.kubelet import MockKubelet
from gpuslice.plugin import NullObserver
from gpuslice.plugin.app import AppOptions, PluginApp
from gpuslice.sharing import build_resources
from gpuslice.wire import deviceplugin_pb2

ROUNDS = 10
CALLS_PER_ROUND = 300
WARMUP = 300
ADMISSIONS = 300
GOAL = 1.5
CONFIG = "sharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: 4}]}}"
ECHO_METHOD = "/bench.Echo/Echo"


def _percentiles(samples: list[float]) -> tuple[float, float]:
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return cuts[49] * 1e6, cuts[98] * 1e6  # microseconds


def _timed(call: Callable[[], Any], count: int, into: list[float]) -> None:
    clock = time.perf_counter
    for _ in range(count):
        started = clock()
        call()
        into.append(clock() - started)


def _echo_server(path: Path) -> tuple[Any, ThreadPoolExecutor]:
    def echo(request: bytes, context: Any) -> bytes:
        return request

    handler = grpc.method_handlers_generic_handler("bench.Echo", {"Echo": grpc.unary_unary_rpc_method_handler(echo)})
    executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="bench-echo")
    server = grpc.server(executor)
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port(f"unix:{path}")
    server.start()
    return server, executor


class HandlerTimes(NullObserver):
    """Time spent inside the plugin's Allocate handler (the PluginObserver seam), to split our cost from gRPC's."""

    def __init__(self) -> None:
        self.seconds: list[float] = []

    def allocated(self, resource: str, device_ids: list[list[str]], seconds: float) -> None:
        self.seconds.append(seconds)


def main() -> None:
    handler = HandlerTimes()
    workdir = Path(tempfile.mkdtemp(prefix="gs-bench-", dir="/tmp"))
    config_file = workdir / "config.yaml"
    config_file.write_text(CONFIG)
    spec = load_node_spec("preset:h100x4")
    config = parse_config_text(CONFIG).config
    plan = build_resources(spec.node, config)
    resource = plan.resources[0]
    device_id = resource.devices[5].id
    request = deviceplugin_pb2.AllocateRequest(
        container_requests=[deviceplugin_pb2.ContainerAllocateRequest(devices_ids=[device_id])]
    )
    payload = request.SerializeToString()
    echo_server, echo_executor = _echo_server(workdir / "echo.sock")
    echo_channel = grpc.insecure_channel(f"unix:{workdir / 'echo.sock'}")
    echo = echo_channel.unary_unary(ECHO_METHOD)
    try:
        with (
            MockKubelet(workdir / "kubelet", checkpoint_enabled=False) as kubelet,
            PluginApp(
                AppOptions(
                    backend="fake",
                    node_spec="preset:h100x4",
                    config_file=str(config_file),
                    kubelet_socket=str(kubelet.socket_path),
                    pod_resources_socket=str(kubelet.pod_resources_socket),
                    nvidia_answers=False,
                ),
                observer=handler,
            ),
        ):
            if not kubelet.wait_for(resource=resource.name, allocatable=len(resource.devices), timeout=10):
                raise RuntimeError("the plugin never registered")
            stub = kubelet.plugin_stub(resource.name)
            answer = stub.Allocate(request)
            assert answer.container_responses[0].envs["NVIDIA_VISIBLE_DEVICES"] == resource.devices[5].physical_id

            def allocate() -> None:
                stub.Allocate(request)

            def bare() -> None:
                echo(payload)

            handler.seconds.clear()
            ours: list[float] = []
            baseline: list[float] = []
            _timed(allocate, WARMUP, [])
            _timed(bare, WARMUP, [])
            for _ in range(ROUNDS):  # interleaved, so drift in machine load hits both sides alike
                gc.collect()
                gc.disable()  # as timeit does: a collection landing in one side's round is noise, not cost
                try:
                    _timed(allocate, CALLS_PER_ROUND, ours)
                    _timed(bare, CALLS_PER_ROUND, baseline)
                finally:
                    gc.enable()

            inside = list(handler.seconds)
            admissions: list[float] = []
            for n in range(ADMISSIONS):
                started = time.perf_counter()
                kubelet.admit_one(f"bench-{n}", resource.name)
                admissions.append(time.perf_counter() - started)
                kubelet.delete_pod(f"bench-{n}")
    finally:
        echo_channel.close()
        echo_server.stop(0).wait()
        echo_executor.shutdown(wait=True)
        shutil.rmtree(workdir, ignore_errors=True)

    our_p50, our_p99 = _percentiles(ours)
    bare_p50, bare_p99 = _percentiles(baseline)
    adm_p50, adm_p99 = _percentiles(admissions)
    in_p50, in_p99 = _percentiles(inside)
    ratio50, ratio99 = our_p50 / bare_p50, our_p99 / bare_p99
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"{len(ours)} calls each, {ROUNDS} interleaved rounds; resource {resource.name} ({resource.derivation})")
    print(f"{os.cpu_count()} CPUs, load average {load:.2f} (p99 is sensitive to other work on the machine)")
    print(f"{'':34}{'p50 us':>10}{'p99 us':>10}")
    print(f"{'Allocate via mock kubelet':34}{our_p50:>10.1f}{our_p99:>10.1f}")
    print(f"{'bare grpcio unary echo (unix)':34}{bare_p50:>10.1f}{bare_p99:>10.1f}")
    print(f"{'ratio':34}{ratio50:>10.2f}{ratio99:>10.2f}   (goal <= {GOAL})")
    print(f"{'  time inside our Allocate handler':34}{in_p50:>10.1f}{in_p99:>10.1f}")
    print(
        f"{'full admission (preferred+alloc)':34}{adm_p50:>10.1f}{adm_p99:>10.1f}   ({ADMISSIONS} pods, informational)"
    )
    verdict = "meets" if ratio50 <= GOAL else "MISSES"
    print(f"p50 ratio {ratio50:.2f} {verdict} the goal of {GOAL}")


if __name__ == "__main__":
    main()
