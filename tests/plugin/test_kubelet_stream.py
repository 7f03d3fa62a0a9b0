"""The kubelet always gets its ListAndWatch stream: local clients holding every slot cannot lock it out."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from gpuslice.allocation import StaticAllocator
from gpuslice.config import parse_config_text
from gpuslice.discovery import load_node_spec
from gpuslice.kubelet import MockKubelet
from gpuslice.plugin.rpc_limits import MAX_STREAMS_PER_RESOURCE, StreamSlots
from gpuslice.plugin.server import ResourceServer
from gpuslice.plugin.service import ResourceService
from gpuslice.sharing import HealthStore, Resource, build_resources
from gpuslice.wire import deviceplugin_pb2
from tests.plugin.conftest import WAIT_S
from tests.plugin.rpc import PluginClient
from tests.support.process import clean_env, reap
from tests.support.stack import Stack, start_stack

NODE = load_node_spec("preset:h100x4").node
(RESOURCE,) = build_resources(NODE, parse_config_text("").config).resources
ROUNDS = 5
LOCAL_CLIENTS = 12


def first_message(call: Any) -> grpc.RpcError | None:
    """Read a stream's first message: None if it came, the refusal otherwise."""
    try:
        next(call)
    except grpc.RpcError as exc:
        return exc
    return None


def serve(kubelet: MockKubelet, health: HealthStore) -> ResourceServer:
    server = ResourceServer(ResourceService(StaticAllocator(RESOURCE, health)), kubelet.device_plugin_dir, workers=4)
    server.start()
    return server


def open_streams(client: PluginClient, count: int) -> tuple[list[Any], list[grpc.RpcError]]:
    """`count` ListAndWatch calls, one after another, each read up to its first message: (open, refused)."""
    opened, refused = [], []
    for _ in range(count):
        call = client.stub.ListAndWatch(deviceplugin_pb2.Empty())
        exc = first_message(call)
        if exc is None:
            opened.append(call)
        else:
            refused.append(exc)
    return opened, refused


def test_local_clients_holding_every_slot_cannot_lock_out_the_kubelets_stream(workdir: Path) -> None:
    """Five times: local clients fill the cap, we register, the kubelet's stream is served and carries updates."""
    cap = MAX_STREAMS_PER_RESOURCE
    with MockKubelet(workdir, dial_timeout_s=2.0, checkpoint_enabled=False) as kubelet:
        for round_ in range(ROUNDS):
            health = HealthStore(NODE)
            server = serve(kubelet, health)
            with PluginClient(server.socket_path) as client:
                local, refused = open_streams(client, cap + 1)
                assert len(local) == cap and len(refused) == 1, "the cap is full before the registration"
                assert refused[0].code() == grpc.StatusCode.RESOURCE_EXHAUSTED

                server.register(kubelet.socket_path)
                assert kubelet.wait_for(
                    resource=RESOURCE.name, registered=True, allocatable=4, min_registrations=round_ + 1, timeout=WAIT_S
                ), f"round {round_}: the kubelet got no devices"
                assert not any(call.done() for call in local), "no local stream was ended"

                # The window's room is bounded: the kubelet's stream and cap - 1 more, then refusals.
                late, refused = open_streams(client, cap)
                assert len(late) == cap - 1 and len(refused) == 1
                assert server.service.open_streams == 2 * cap == server.service.streams.max_threads
                health.mark_unhealthy(NODE.gpus[0].uuid, "test")
                assert kubelet.wait_for(resource=RESOURCE.name, registered=True, allocatable=3, timeout=WAIT_S), (
                    "the kubelet's stream carries updates"
                )
                for call in local + late:
                    call.cancel()
            kubelet.restart()
            server.stop()


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_window_opens_with_register_and_closes_after_it() -> None:
    clock = FakeClock()
    streams = StreamSlots(2, window_s=5.0, clock=clock)
    assert streams.take() is not None and streams.take() is not None
    assert streams.take() is None, "outside a window the cap refuses"
    with streams.registration():
        clock.now += 1
        assert streams.take() is not None, "while Register is in flight"
    clock.now += 4.9
    release = streams.take()
    assert release is not None and streams.take() is None, "at most twice the cap, even in the window"
    release()
    release()  # idempotent
    assert streams.open == 3
    clock.now += 0.2  # the window closed 5 s after Register returned
    assert streams.take() is None


def test_a_failed_registration_closes_its_window_at_once() -> None:
    clock = FakeClock()
    streams = StreamSlots(1, window_s=5.0, clock=clock)
    assert streams.take() is not None
    with pytest.raises(RuntimeError), streams.registration():
        raise RuntimeError("refused")
    clock.now += 0.001
    assert streams.take() is None


# Local clients in a process of their own (as a monitoring agent would be): each thread keeps a
# ListAndWatch stream open on the socket and dials again at once whenever it ends or is refused.
REDIALERS = """
import sys, threading, time
import grpc
from gpuslice.wire import deviceplugin_grpc, deviceplugin_pb2

def redial(path):
    while True:
        with grpc.insecure_channel("unix:" + path) as channel:
            call = deviceplugin_grpc.DevicePluginStub(channel).ListAndWatch(deviceplugin_pb2.Empty())
            try:
                for _ in call:
                    pass
            except grpc.RpcError:
                pass
        time.sleep(0.01)

for _ in range(int(sys.argv[2])):
    threading.Thread(target=redial, args=(sys.argv[1],), daemon=True).start()
print("started", flush=True)
sys.stdin.read()  # until the test closes our stdin
"""


@pytest.fixture
def redialers(stacks: list[Stack], workdir: Path) -> Iterator[Stack]:
    stack = start_stack(workdir)
    stacks.append(stack)
    (server,) = stack.manager.servers
    args = [sys.executable, "-c", REDIALERS, str(server.socket_path), str(LOCAL_CLIENTS)]
    process = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=clean_env())
    try:
        assert process.stdout is not None and process.stdout.readline() == "started\n"
        deadline = time.monotonic() + WAIT_S
        while server.service.open_streams < MAX_STREAMS_PER_RESOURCE and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server.service.open_streams >= MAX_STREAMS_PER_RESOURCE, "the local clients hold every slot"
        yield stack
    finally:
        reap(process)


def test_a_restarted_kubelet_gets_its_devices_next_to_twelve_redialing_clients(redialers: Stack) -> None:
    stack = redialers
    resource: Resource = stack.plan.resources[0]
    for round_ in range(ROUNDS):
        stack.kubelet.restart()
        assert stack.kubelet.wait_for(
            resource=resource.name,
            registered=True,
            allocatable=len(resource.devices),
            min_registrations=round_ + 2,
            timeout=WAIT_S,
        ), f"restart {round_ + 1}: the kubelet got no devices"
