"""NodePrepareResources of `gpuslice dra` (claim read over HTTP, CDI spec and checkpoint written) beside a bare DRA
floor's and the device plugin's Allocate of the same whole GPU, all over real gRPC; one run, interleaved."""

from __future__ import annotations

import functools
import gc
import itertools
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from benchmarks.bench_allocate import MODES, HandlerTimes, app_socket, served_plugin
from benchmarks.dra_floor import FLOOR_AGENT, served_floor
from benchmarks.figures import Figure, bytecode_env, percentile
from gpuslice.discovery.driver_files_fake import build_fake_driver_root
from gpuslice.dra import DraApp, DraSettings, prepare_setup
from gpuslice.dra.kube import LightkubeResourceApi
from gpuslice.kubelet.dra_mock import CALL_TIMEOUT_S, MockDraKubelet
from gpuslice.wire import deviceplugin_grpc, deviceplugin_pb2, dra_v1_grpc, dra_v1_pb2

ROUNDS = 20
TRIPLES_PER_ROUND = 25  # one prepare, one of the bare floor and one Allocate each, back to back
WARMUP = 30
GOAL = 2.0
WHOLE = MODES[0]  # whole GPUs on preset:h100x4, no sharing
GPU_INDEX = 0  # the device both sides hand out: GPU 0 (DRA device gpu-0, device-plugin ID its UUID)
CLASS = "gpu.gpuslice.io"
FAKE_DRIVER_VERSION = "550.127.08"  # what the fake backend's GPUs report, so the driver root matches them
CLAIMS = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims"
# The mock DRA kubelet's API server (gpuslice.kubelet.dra_api), alone in a child process as a real one is in
# its own, so that it does not take the plugin's GIL. It times its answer to each GET of a claim (from the
# parsed request to the last byte written) and prints those times, one JSON list of [seconds, whether the
# bare floor asked] pairs, when its stdin closes.
API_CHILD = """
import json, sys, time
from gpuslice.kubelet.dra_api import FakeKubeApi
api = FakeKubeApi().start()
handler = api._server.RequestHandlerClass
answer, seconds = handler.do_GET, []
def timed(self):
    started = time.perf_counter()
    answer(self)
    if "/resourceclaims/" in self.path:
        seconds.append([time.perf_counter() - started, self.headers.get("User-Agent") == sys.argv[1]])
handler.do_GET = timed
print(api.url, flush=True)
sys.stdin.read()
api.stop()
print(json.dumps(seconds), flush=True)
"""


@dataclass
class Inside:
    """Times taken inside the plugin's process, per prepare call: wrappers around what the node service
    calls (the same objects it serves) and around os.fsync (only the DRA plugin syncs files here)."""

    reads: list[float] = field(default_factory=list)  # ClaimReads.prefetch: the API read, HTTP and decode
    prepares: list[float] = field(default_factory=list)  # GpuDriver.prepare: checks, CDI spec, checkpoint
    fsyncs: list[float] = field(default_factory=list)  # seconds in os.fsync during each timed prepare call
    api_answers: list[float] = field(default_factory=list)  # the API server child's answer to the plugin's GETs
    fsync_s: float = 0.0  # running total, read before and after each call
    lock: threading.Lock = field(default_factory=threading.Lock)

    def clear(self) -> None:
        self.reads.clear()
        self.prepares.clear()
        self.fsyncs.clear()


def _timing(function: Callable[..., Any], into: list[float]) -> Callable[..., Any]:
    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            into.append(time.perf_counter() - started)

    return timed


@contextmanager
def _fsyncs_counted(inside: Inside) -> Iterator[None]:
    real = os.fsync

    def counted(fd: Any) -> None:
        started = time.perf_counter()
        try:
            real(fd)
        finally:
            with inside.lock:
                inside.fsync_s += time.perf_counter() - started

    os.fsync = counted
    try:
        yield
    finally:
        os.fsync = real


def _claim(name: str, driver: str, pool: str, device: str) -> dict[str, Any]:
    """An allocated, reserved ResourceClaim for one whole GPU, as the scheduler leaves it (the mock's shape)."""
    node = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [pool]}]}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": CLASS, "count": 1}}]}},
        "status": {
            "allocation": {
                "devices": {
                    "results": [{"request": "gpu", "driver": driver, "pool": pool, "device": device}],
                    "config": [],
                },
                "nodeSelector": {"nodeSelectorTerms": [node]},
            },
            "reservedFor": [{"resource": "pods", "name": f"pod-{name}", "uid": str(uuid.uuid4())}],
        },
    }


@contextmanager
def _api_server(answers: list[float]) -> Iterator[str]:
    """The fake API server in a child process; yields its URL. Once stopped, `answers` holds its answer times
    to the plugin's reads of claims (the bare floor's are left out)."""
    child = subprocess.Popen(
        [sys.executable, "-c", API_CHILD, FLOOR_AGENT],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=bytecode_env(),
    )
    try:
        assert child.stdin is not None and child.stdout is not None
        url = child.stdout.readline().strip()
        if not url.startswith("http://"):
            raise RuntimeError(f"the API server child did not start (said {url!r})")
        yield url
        child.stdin.close()
        answers.extend(
            seconds for seconds, floor_asked in json.loads(child.stdout.readline() or "[]") if not floor_asked
        )
    finally:
        if child.stdin is not None:
            child.stdin.close()
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


class DraSide:
    """The real DRA plugin (DraApp) in this process, registered with the mock DRA kubelet, reading claims from
    the API server child; `call()` prepares a claim over gRPC (timed by the caller), `release()` unprepares it."""

    def __init__(self, app: DraApp, api_url: str, device: str) -> None:
        self.app = app
        self.api_url = api_url
        self.device = device
        self.driver = app.settings.driver
        self.pool = app.setup.node.name
        self.channel = grpc.insecure_channel(f"unix:{app.settings.dra_socket}")
        self.stub = dra_v1_grpc.DRAPluginStub(self.channel)  # type: ignore[no-untyped-call]
        self.created = 0

    def new_claims(self, count: int, device: str | None = None) -> list[Any]:
        """Fresh claims in the API server (so each prepare really prepares); the requests that prepare them."""
        requests = []
        for _ in range(count):
            self.created += 1
            body = json.dumps(_claim(f"c-{self.created}", self.driver, self.pool, device or self.device)).encode()
            post = urllib.request.Request(
                self.api_url + CLAIMS, body, {"Content-Type": "application/json"}, method="POST"
            )
            with urllib.request.urlopen(post, timeout=10) as answer:
                metadata = json.load(answer)["metadata"]
            claim = dra_v1_pb2.Claim(namespace=metadata["namespace"], name=metadata["name"], uid=metadata["uid"])
            requests.append(dra_v1_pb2.NodePrepareResourcesRequest(claims=[claim]))
        return requests

    def call(self, request: Any) -> None:
        answer = self.stub.NodePrepareResources(request, timeout=CALL_TIMEOUT_S)
        uid = request.claims[0].uid
        if answer.claims[uid].error or not answer.claims[uid].devices:
            raise RuntimeError(f"claim {uid}: {answer.claims[uid].error or 'no devices'}")

    def release(self, request: Any) -> None:
        claims = request.claims
        answer = self.stub.NodeUnprepareResources(
            dra_v1_pb2.NodeUnprepareResourcesRequest(claims=claims), timeout=CALL_TIMEOUT_S
        )
        for claim in claims:
            if answer.claims[claim.uid].error:
                raise RuntimeError(f"unprepare {claim.uid}: {answer.claims[claim.uid].error}")

    def close(self) -> None:
        self.channel.close()


@contextmanager
def served_dra(workdir: Path, inside: Inside, cdi_dir: Path) -> Iterator[DraSide]:
    """`gpuslice dra`'s app over preset:h100x4 with a driver root (the claim spec carries the driver's files, as
    on a node), registered with the mock DRA kubelet and its slices published; timing wrappers installed. Its
    checkpoint is under `workdir` (the kubelet's plugin dir), its claims' CDI specs in `cdi_dir`."""
    driver_root = build_fake_driver_root(workdir / "driver-root", version=FAKE_DRIVER_VERSION)
    overrides = {"flags.nvidiaDriverRoot": str(driver_root), "flags.plugin.containerDriverRoot": str(driver_root)}
    (workdir / "config.yaml").write_text(WHOLE.config)
    setup = prepare_setup("fake", WHOLE.node_spec, str(workdir / "config.yaml"), overrides=overrides)
    device = next(d for d in setup.devices if d.kind == "gpu" and d.gpu.index == GPU_INDEX)
    with _api_server(inside.api_answers) as api_url, MockDraKubelet(workdir / "kubelet", setup.node.name) as kubelet:
        settings = DraSettings(registry_dir=kubelet.registry_dir, plugins_dir=kubelet.plugins_dir, cdi_dir=cdi_dir)
        app = DraApp(setup, settings, LightkubeResourceApi(api_url))
        # The node service looks these up on every call, so wrapping the instances times what it calls.
        reads = app.driver.reads
        setattr(reads, "prefetch", _timing(reads.prefetch, inside.reads))  # noqa: B010
        setattr(app.driver, "prepare", _timing(app.driver.prepare, inside.prepares))  # noqa: B010
        app.start()
        side = DraSide(app, api_url, device.name)
        try:
            if not kubelet.watcher.wait_registered(side.driver, timeout=10):
                raise RuntimeError("the DRA plugin never registered")
            if app.plugin.slices is None or not app.plugin.slices.wait_synced(10):
                raise RuntimeError("the DRA plugin never published its slices")
            yield side
        finally:
            side.close()
            app.stop()


def _in_turn(sides: list[tuple[Callable[[], None], list[float]]]) -> None:
    """Each side's call back to back, in the order given, its time appended to that side's list."""
    clock = time.perf_counter
    marks = [clock()]
    for call, _ in sides:
        call()
        marks.append(clock())
    for (_, samples), (started, ended) in zip(sides, itertools.pairwise(marks), strict=True):
        samples.append(ended - started)


@dataclass(frozen=True)
class Measured:
    prepare: list[float]
    floor: list[float]  # the bare DRA floor's NodePrepareResources of the same claim (benchmarks/dra_floor.py)
    allocate: list[float]
    unprepare: list[float]
    allocate_handler: list[float]
    inside: Inside
    checkpoint_records: int
    spec_bytes: int

    def ratio(self) -> float:
        return percentile(self.prepare, 0.5) / percentile(self.allocate, 0.5)

    def floor_ratio(self) -> float:
        return percentile(self.floor, 0.5) / percentile(self.allocate, 0.5)

    def api_answers(self) -> list[float]:
        """The API server's answers to the timed prepares' reads (they come last, one each, in order)."""
        return self.inside.api_answers[-len(self.prepare) :]

    def plugin_cpu(self) -> list[float]:
        """Each prepare's round trip less its fsyncs and less the API server's answer to its read."""
        parts = zip(self.prepare, self.inside.fsyncs, self.api_answers(), strict=True)
        return [total - synced - answered for total, synced, answered in parts]


def tmpfs_root() -> Path | None:
    """A writable tmpfs (from /proc/mounts) to hold the CDI spec dir as a node does: `--cdi-spec-dir` defaults
    to /var/run/cdi, and /var/run is /run, a tmpfs, on every systemd distribution. None: there is none here."""
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return None
    for line in mounts:
        fields = line.split()
        node_like = len(fields) >= 3 and fields[2] == "tmpfs" and fields[1] in ("/run", "/dev/shm")
        if node_like and os.access(fields[1], os.W_OK | os.X_OK):
            return Path(fields[1])
    return None


def _measure(workdir: Path, cdi_dir: Path) -> Measured:
    observer = HandlerTimes()
    inside = Inside()
    (workdir / "dp").mkdir(parents=True)
    (workdir / "dra").mkdir()
    (workdir / "floor").mkdir()
    with (
        served_plugin(WHOLE, workdir / "dp", observer) as (kubelet, resource),
        served_dra(workdir / "dra", inside, cdi_dir) as dra,
        served_floor(workdir / "floor.sock", dra.api_url, workdir / "floor" / "claims.json") as floor_stub,
        _fsyncs_counted(inside),
    ):
        gpu = next(d for d in dra.app.setup.devices if d.kind == "gpu" and d.gpu.index == GPU_INDEX).gpu
        device = next(d for d in resource.devices if d.id == gpu.uuid)
        allocate_request = deviceplugin_pb2.AllocateRequest(
            container_requests=[deviceplugin_pb2.ContainerAllocateRequest(devices_ids=[device.id])]
        )
        channel = grpc.insecure_channel(f"unix:{app_socket(kubelet, resource.name)}")
        allocate_stub = deviceplugin_grpc.DevicePluginStub(channel)  # type: ignore[no-untyped-call]
        # The node's other GPUs prepared for claims of their own: the checkpoint holds them while GPU 0 is timed.
        others = [r for d in dra.app.setup.devices if d.name != dra.device for r in dra.new_claims(1, d.name)]
        warmup = dra.new_claims(WARMUP)
        timed = dra.new_claims(ROUNDS * TRIPLES_PER_ROUND)
        try:
            for request in others:
                dra.call(request)

            def allocate() -> None:
                allocate_stub.Allocate(allocate_request, timeout=CALL_TIMEOUT_S)

            def floor_prepare(request: Any) -> None:
                answer = floor_stub.NodePrepareResources(request, timeout=CALL_TIMEOUT_S)
                if not answer.claims[request.claims[0].uid].devices:
                    raise RuntimeError("the bare floor prepared no device")

            def floor_release(request: Any) -> None:
                unprepare = dra_v1_pb2.NodeUnprepareResourcesRequest(claims=request.claims)
                floor_stub.NodeUnprepareResources(unprepare, timeout=CALL_TIMEOUT_S)

            for request in others:
                floor_prepare(request)  # the floor's checkpoint holds as many claims as the plugin's
            for request in warmup:
                dra.call(request)
                floor_prepare(request)
                allocate()
                dra.release(request)
                floor_release(request)
            inside.clear()
            observer.seconds.clear()
            prepare_s: list[float] = []
            floor_s: list[float] = []
            allocate_s: list[float] = []
            unprepare_s: list[float] = []
            records = len(dra.app.driver.preparer.records()) + 1
            spec_bytes = max(p.stat().st_size for p in dra.app.settings.cdi_dir.glob("*claim_*.json"))
            orders = list(itertools.permutations(range(3)))
            # Triple by triple, so that a change of machine load hits all three alike; their order changes every
            # round (all six orders in turn). Each prepare is of a claim never prepared before (created ahead),
            # the floor's of the same claim (it only reads it), both unprepared after their triple.
            for number in range(ROUNDS):
                gc.collect()
                gc.disable()  # as timeit does: a collection landing in one side's call is noise, not cost
                try:
                    for request in timed[number * TRIPLES_PER_ROUND : (number + 1) * TRIPLES_PER_ROUND]:
                        synced = inside.fsync_s
                        sides: list[tuple[Callable[[], None], list[float]]] = [
                            (functools.partial(dra.call, request), prepare_s),
                            (functools.partial(floor_prepare, request), floor_s),
                            (allocate, allocate_s),
                        ]
                        _in_turn([sides[index] for index in orders[number % len(orders)]])
                        inside.fsyncs.append(inside.fsync_s - synced)
                        started = time.perf_counter()
                        dra.release(request)
                        unprepare_s.append(time.perf_counter() - started)
                        floor_release(request)
                finally:
                    gc.enable()
            for request in others:
                dra.release(request)
                floor_release(request)
        finally:
            channel.close()
    return Measured(prepare_s, floor_s, allocate_s, unprepare_s, list(observer.seconds), inside, records, spec_bytes)


def _us(samples: list[float], fraction: float) -> float:
    return percentile(samples, fraction) * 1e6


def main() -> list[Figure]:
    logging.getLogger("gpuslice.kubelet").setLevel(logging.ERROR)  # each stop logs an ended stream: expected here
    root = Path(tempfile.mkdtemp(prefix="gs"))  # short: Unix socket paths stay under 107 bytes
    tmpfs = tmpfs_root()
    spec_root = Path(tempfile.mkdtemp(prefix="gs-cdi", dir=tmpfs)) if tmpfs is not None else None
    try:
        # As on a node: the claims' CDI specs on a tmpfs, the checkpoint on disk; then both on disk.
        result = _measure(root / "node", (spec_root or root) / "cdi")
        on_disk = _measure(root / "disk", root / "disk-cdi") if spec_root is not None else None
    finally:
        shutil.rmtree(root, ignore_errors=True)
        if spec_root is not None:
            shutil.rmtree(spec_root, ignore_errors=True)
    load = os.getloadavg()[0]
    print(
        f"{ROUNDS} rounds of {TRIPLES_PER_ROUND} triples (a NodePrepareResources of a fresh claim, the bare DRA "
        f"floor's of the same claim, an Allocate of the same GPU; back to back, the order turned each round); "
        f"{os.cpu_count()} CPUs, load {load:.2f}"
    )
    print(
        "both timed at the client over gRPC on Unix sockets; the claim read from the mock kubelet's API server "
        f"(a child process) over HTTP; {result.checkpoint_records} claims in the checkpoint while one is prepared; "
        f"claim spec {result.spec_bytes} bytes; checkpoint on {root.parent}'s file system, CDI specs "
        + (f"on the tmpfs {tmpfs} (as /var/run/cdi on a node)" if tmpfs else "there too (no tmpfs found)")
    )
    rows = [
        ("NodePrepareResources, round trip", result.prepare),
        ("bare DRA floor's NodePrepareResources, round trip", result.floor),
        ("Allocate, round trip", result.allocate),
        ("  prepare: claim read (prefetch: HTTP GET, decode)", result.inside.reads),
        ("  prepare: driver (checks, CDI spec, checkpoint)", result.inside.prepares),
        ("  prepare: of which in os.fsync", result.inside.fsyncs),
        ("  prepare: of which the API server's answer to the GET", result.api_answers()),
        ("  prepare: round trip less these two", result.plugin_cpu()),
        ("  Allocate: handler", result.allocate_handler),
        ("NodeUnprepareResources, round trip (between triples)", result.unprepare),
    ]
    print(f"{'':56}{'p50 us':>10}{'p99 us':>10}")
    for name, samples in rows:
        print(f"{name:56}{_us(samples, 0.5):>10.0f}{_us(samples, 0.99):>10.0f}")
    prepare_p50 = _us(result.prepare, 0.5)
    floor_p50 = _us(result.floor, 0.5)
    allocate_p50 = _us(result.allocate, 0.5)
    less = percentile(result.plugin_cpu(), 0.5) / percentile(result.allocate, 0.5)
    figures = [
        Figure(
            "NodePrepareResources p50 / Allocate p50, whole GPU",
            result.ratio(),
            "x",
            GOAL,
            note=f"same run: {prepare_p50:.0f} / {allocate_p50:.0f} us; CDI specs on "
            + ("tmpfs, as on a node" if tmpfs else "disk"),
        ),
        Figure(
            "  the same, less fsyncs and the API's answer", less, "x", note="informational: disk and API server apart"
        ),
        Figure(
            "  bare DRA floor p50 / Allocate p50",
            result.floor_ratio(),
            "x",
            note=f"informational: {floor_p50:.0f} / {allocate_p50:.0f} us; above {GOAL:g}x, no driver that reads "
            "the claim and keeps a durable checkpoint meets the goal here",
        ),
        Figure(
            "  NodePrepareResources p50 / bare DRA floor p50",
            result.ratio() / result.floor_ratio(),
            "x",
            note=f"informational: gpuslice beside the least a DRA driver does ({prepare_p50:.0f} / {floor_p50:.0f} us)",
        ),
    ]
    if on_disk is not None:
        print(
            f"{'the same with the CDI specs on disk too: prepare / Allocate':56}"
            f"{_us(on_disk.prepare, 0.5):>10.0f}{_us(on_disk.allocate, 0.5):>10.0f}"
        )
        disk_note = f"informational: {_us(on_disk.prepare, 0.5):.0f} / {_us(on_disk.allocate, 0.5):.0f} us"
        figures.append(Figure("  the same, CDI specs on disk too", on_disk.ratio(), "x", note=disk_note))
    return figures


if __name__ == "__main__":
    main()
