"""ListAndWatch: the full list first, the full list again on every change, clean ends without leaks."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import grpc

from gpuslice.kubelet import MockKubelet
from gpuslice.wire import HEALTHY, UNHEALTHY, deviceplugin_pb2
from tests.plugin.conftest import WAIT_S, StartPlugin, our_threads
from tests.plugin.rpc import PluginClient

TIME_SLICED = "sharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: 2}]}}"


def eventually(check: Callable[[], bool], timeout: float = WAIT_S) -> bool:
    """Waits for state owned by gRPC threads that offer no event to wait on."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_full_list_first_then_again_on_every_change(start_plugin: StartPlugin) -> None:
    plugin = start_plugin(config=TIME_SLICED)
    server = plugin.manager.servers[0]
    g1 = plugin.node.gpus[1].uuid
    with PluginClient(server.socket_path) as client:
        stream = client.stub.ListAndWatch(deviceplugin_pb2.Empty())
        first = next(stream)
        assert [d.ID for d in first.devices] == [d.id for d in plugin.resource.devices]
        assert {d.health for d in first.devices} == {HEALTHY}
        assert [d.topology.nodes[0].ID for d in first.devices[:8:2]] == [0, 0, 1, 1]
        plugin.manager.set_health(g1, healthy=False)
        second = next(stream)
        assert len(second.devices) == 8, "always the complete list"
        assert {d.ID for d in second.devices if d.health == UNHEALTHY} == {f"{g1}::0", f"{g1}::1"}
        plugin.manager.set_health(g1, healthy=True)
        assert {d.health for d in next(stream).devices} == {HEALTHY}
        stream.cancel()
    assert eventually(lambda: server.service.open_streams == 1), "only the kubelet's stream is left"


def test_client_cancel_ends_the_stream_and_frees_its_thread(start_plugin: StartPlugin) -> None:
    plugin = start_plugin()
    service = plugin.manager.servers[0].service
    with PluginClient(plugin.manager.socket_paths[0]) as client:
        streams = [client.stub.ListAndWatch(deviceplugin_pb2.Empty()) for _ in range(3)]
        for stream in streams:
            next(stream)
        assert eventually(lambda: service.open_streams == 4)
        for stream in streams:
            stream.cancel()
        assert eventually(lambda: service.open_streams == 1)


def test_stop_ends_open_streams_and_leaves_no_threads(kubelet: MockKubelet, start_plugin: StartPlugin) -> None:
    plugin = start_plugin()
    ended = threading.Event()
    with PluginClient(plugin.manager.socket_paths[0]) as client:
        stream = client.stub.ListAndWatch(deviceplugin_pb2.Empty())
        next(stream)

        def drain() -> None:
            try:
                for _ in stream:
                    pass
            except grpc.RpcError:
                pass
            ended.set()

        reader = threading.Thread(target=drain)
        reader.start()
        plugin.manager.stop()
        assert ended.wait(WAIT_S), "the stream ended when the plugin stopped"
        reader.join(WAIT_S)
    assert not [t for t in our_threads() if t.startswith("gpuslice-")]
    assert kubelet.wait_for(resource="nvidia.com/gpu", registered=False, timeout=WAIT_S)


def test_many_health_flips_end_in_the_right_state(kubelet: MockKubelet, start_plugin: StartPlugin) -> None:
    plugin = start_plugin(config=TIME_SLICED)
    uuids = [g.uuid for g in plugin.node.gpus]
    final: dict[str, bool] = {}
    for round_ in range(50):
        gpu, healthy = uuids[round_ % 4], round_ % 3 == 0
        plugin.manager.set_health(gpu, healthy=healthy)
        final[gpu] = healthy
    sick = {gpu for gpu, healthy in final.items() if not healthy}
    assert sick, "the sequence must leave some GPU unhealthy"
    assert kubelet.wait_for(resource="nvidia.com/gpu", allocatable=8 - 2 * len(sick), timeout=WAIT_S)
    view = kubelet.resource("nvidia.com/gpu")
    assert view is not None and {i.split("::")[0] for i in view.unhealthy} == sick
