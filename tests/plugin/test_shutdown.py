"""Shutdown and stream ends: signals stop everything and remove our sockets; ended streams leak nothing."""

from __future__ import annotations

import json
import os
import signal
import stat
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from gpuslice.kubelet import MockKubelet
from gpuslice.signal_loop import run_until_signalled
from gpuslice.wire import deviceplugin_grpc, deviceplugin_pb2
from tests.support.process import finish, plugin_process, reap
from tests.support.stack import TIME_SLICED_4, Stack, start_stack

WAIT_S = 20.0


def plugin_sockets(directory: Path) -> list[str]:
    return sorted(
        entry.name
        for entry in directory.iterdir()
        if stat.S_ISSOCK(entry.lstat().st_mode) and entry.name.startswith("gpuslice-")
    )


def test_stop_removes_sockets_stops_threads_and_runs_hooks_in_reverse(stacks: list[Stack], workdir: Path) -> None:
    stack = start_stack(workdir, config=TIME_SLICED_4, metrics_port=0)
    calls: list[str] = []
    stack.runtime.add_shutdown_hook(lambda: calls.append("mps daemon a"))
    stack.runtime.add_shutdown_hook(lambda: (_ for _ in ()).throw(RuntimeError("hook fails")))
    stack.runtime.add_shutdown_hook(lambda: calls.append("mps daemon b"))
    directory = stack.kubelet.device_plugin_dir
    assert plugin_sockets(directory) == ["gpuslice-nvidia.com-gpu.sock"]
    stack.runtime.stop()
    stack.runtime.stop()  # idempotent
    assert calls == ["mps daemon b", "mps daemon a"]
    assert plugin_sockets(directory) == []
    assert stack.runtime.ready() == (False, "shutting down")
    assert stack.kubelet.wait_for(resource="nvidia.com/gpu", registered=False, timeout=WAIT_S)
    stack.kubelet.stop()


def test_run_until_signalled_returns_on_sigterm_after_cleanup(stacks: list[Stack], workdir: Path) -> None:
    stack = start_stack(workdir, start=False)
    stacks.append(stack)
    hup = threading.Event()

    def send() -> None:
        assert stack.wait_registered()
        os.kill(os.getpid(), signal.SIGHUP)
        assert hup.wait(WAIT_S)
        os.kill(os.getpid(), signal.SIGTERM)

    sender = threading.Thread(target=send, name="test-signal")

    before = signal.getsignal(signal.SIGTERM)
    assert run_until_signalled(stack.runtime, sender.start, handlers={signal.SIGHUP: hup.set}) is signal.SIGTERM
    sender.join()
    assert plugin_sockets(stack.kubelet.device_plugin_dir) == []
    assert signal.getsignal(signal.SIGTERM) == before


def test_streams_ended_by_the_client_leak_no_threads(stacks: list[Stack], workdir: Path) -> None:
    stack = start_stack(workdir, config=TIME_SLICED_4)
    stacks.append(stack)
    (socket,) = stack.manager.socket_paths
    (server,) = stack.manager.servers
    service = server.service
    pool_prefix = "gpuslice-gpuslice-nvidia.com-gpu"

    def open_and_cancel() -> None:
        with grpc.insecure_channel(f"unix:{socket}") as channel:
            stub = deviceplugin_grpc.DevicePluginStub(channel)  # type: ignore[no-untyped-call]
            stream = stub.ListAndWatch(deviceplugin_pb2.Empty())
            assert len(next(stream).devices) == 16
            stream.cancel()

    def other_threads() -> int:
        return sum(1 for t in threading.enumerate() if not t.name.startswith(pool_prefix))

    def settle(limit: int) -> int:
        deadline = time.monotonic() + 5.0
        while (service.open_streams > 1 or other_threads() > limit) and time.monotonic() < deadline:
            time.sleep(0.01)
        return other_threads()

    for _ in range(3):
        open_and_cancel()
    baseline = settle(10**6)
    for _ in range(30):
        open_and_cancel()
    assert settle(baseline) <= baseline
    assert service.open_streams == 1  # the kubelet's own stream is still open
    # Each ended stream gives its worker back: the server's pool stays within its bound.
    assert sum(1 for t in threading.enumerate() if t.name.startswith(pool_prefix)) <= 8


def test_stream_ended_by_the_kubelet_closes_it_on_our_side(stacks: list[Stack], workdir: Path) -> None:
    stack = start_stack(workdir)
    stacks.append(stack)
    (server,) = stack.manager.servers
    assert server.service.open_streams == 1
    stack.kubelet.stop()
    deadline = time.monotonic() + WAIT_S
    while server.service.open_streams and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.service.open_streams == 0


NODE_SPEC = """\
name: shutdown-test
health_events: events
gpus:
  - model: NVIDIA H100 80GB HBM3
    count: 2
    memory_mib: 81559
    compute_capability: "9.0"
"""


@pytest.fixture
def kubelet(workdir: Path) -> Iterator[MockKubelet]:
    with MockKubelet(workdir / "dp", dial_timeout_s=5.0, checkpoint_enabled=False) as running:
        yield running


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGQUIT])
def test_plugin_process_exits_zero_and_leaves_no_socket(
    kubelet: MockKubelet, workdir: Path, sig: signal.Signals
) -> None:
    spec = workdir / "node.yaml"
    spec.write_text(NODE_SPEC)
    events = workdir / "events"
    args = ["--backend", "fake", "--node-spec", str(spec), "--kubelet-socket", str(kubelet.socket_path)]
    process = plugin_process([*args, "--metrics-port", "0", "--log-format", "json"], {"NODE_NAME": "node-7"})
    try:
        assert kubelet.wait_for(resource="nvidia.com/gpu", registered=True, allocatable=2, timeout=WAIT_S)
        uuid = next(iter(sorted(kubelet.resource("nvidia.com/gpu").devices)))  # type: ignore[union-attr]
        with events.open("a") as handle:
            handle.write(f"{uuid} 79\n")
        assert kubelet.wait_for(resource="nvidia.com/gpu", allocatable=1, capacity=2, timeout=WAIT_S)
        code, err = finish(process, sig, timeout=WAIT_S)
    finally:
        reap(process)
    assert code == 0, err
    assert plugin_sockets(kubelet.device_plugin_dir) == []
    lines = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    assert any("XidCriticalError: Xid=79" in line["msg"] for line in lines)
    assert all(line["node"] == "node-7" for line in lines)
    assert any(f"received {sig.name}" in line["msg"] for line in lines)


def test_metrics_port_serves_while_running(kubelet: MockKubelet, workdir: Path) -> None:
    args = ["--backend", "fake", "--node-spec", "preset:h100x4", "--kubelet-socket", str(kubelet.socket_path)]
    process = plugin_process([*args, "--metrics-port", "0", "-v", "1"])
    port = None
    try:
        assert process.stderr is not None
        for line in process.stderr:
            if "serving /metrics" in line:
                port = int(line.rsplit("port ", 1)[1].split()[0])
                break
        assert port is not None
        assert kubelet.wait_for(resource="nvidia.com/gpu", registered=True, allocatable=4, timeout=WAIT_S)
        deadline = time.monotonic() + WAIT_S
        status = 0
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=WAIT_S) as response:
                    status = response.status
                    break
            except urllib.error.HTTPError:
                time.sleep(0.05)
        assert status == 200
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=WAIT_S) as response:
            assert 'gpuslice_plugin_advertised_devices{resource="nvidia.com/gpu"} 4.0' in response.read().decode()
        code, _ = finish(process, signal.SIGTERM, timeout=WAIT_S)
    finally:
        reap(process)
    assert code == 0
