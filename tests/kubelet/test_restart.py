"""A simulated kubelet restart: every socket wiped, kubelet.sock re-created, plugins must register again."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import grpc
import pytest

from gpuslice.kubelet import AdmissionError, MockKubelet
from gpuslice.wire import deviceplugin_grpc, deviceplugin_pb2
from tests.kubelet.conftest import MakePlugin, register

RESOURCE = "example.com/fake"


def make_stray_socket(path: Path) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as stray:
        stray.bind(str(path))


def test_start_wipes_stale_sockets_but_keeps_files(workdir: Path) -> None:
    directory = workdir / "device-plugins"
    directory.mkdir()
    make_stray_socket(directory / "stale.sock")
    (directory / "notes.txt").write_text("keep me")
    (directory / "sub").mkdir()
    make_stray_socket(directory / "sub" / "nested.sock")
    with MockKubelet(directory):
        names = sorted(path.name for path in directory.iterdir())
        assert names == ["kubelet.sock", "notes.txt", "sub"]
        assert (directory / "sub" / "nested.sock").is_socket()


def test_restart_wipes_sockets_and_requires_reregistration(kubelet: MockKubelet, make_plugin: MakePlugin) -> None:
    plugin = make_plugin()
    register(kubelet, plugin)
    allocation = kubelet.admit_one("pod-a", RESOURCE, 1)
    make_stray_socket(kubelet.device_plugin_dir / "stray.sock")
    inode_before = kubelet.socket_path.stat().st_ino

    kubelet.restart()

    assert kubelet.restarts == 1
    assert kubelet.socket_path.is_socket()
    assert kubelet.socket_path.stat().st_ino != inode_before
    assert not plugin.socket_path.exists()
    assert not (kubelet.device_plugin_dir / "stray.sock").exists()
    assert not (kubelet.device_plugin_dir / ".kubelet.sock.restart-hold").exists()
    assert kubelet.pod_resources_socket.is_socket()
    assert plugin.wait_streams_active(0)
    view = kubelet.resources()[RESOURCE]
    assert (view.registered, view.capacity, view.allocatable) == (False, 0, 0)
    # Pods keep their devices across the restart.
    assert view.allocated == set(allocation.device_ids)
    # Until the plugin registers again, admission fails the way kubernetes #109595 describes.
    with pytest.raises(AdmissionError) as caught:
        kubelet.admit_one("pod-b", RESOURCE, 1)
    assert caught.value.cause == f"no healthy devices present; cannot allocate unhealthy devices {RESOURCE}"


def test_plugin_registers_again_after_restart(kubelet: MockKubelet, make_plugin: MakePlugin) -> None:
    first = make_plugin("first.sock")
    register(kubelet, first)
    kubelet.restart()
    # A plugin that noticed the restart serves on a fresh socket and registers again.
    second = make_plugin("second.sock")
    register(kubelet, second)
    view = kubelet.resources()[RESOURCE]
    assert (view.registered, view.capacity, view.allocatable, view.registrations) == (True, 4, 4, 2)
    assert kubelet.admit_one("pod-a", RESOURCE, 4).device_ids


def test_registration_server_answers_after_restart(kubelet: MockKubelet) -> None:
    kubelet.restart()
    kubelet.restart()
    with grpc.insecure_channel(f"unix:{kubelet.socket_path}") as channel, pytest.raises(grpc.RpcError) as caught:
        deviceplugin_grpc.RegistrationStub(channel).Register(  # type: ignore[no-untyped-call]
            deviceplugin_pb2.RegisterRequest(version="v0", endpoint="x.sock", resource_name="example.com/x"),
            timeout=5,
        )
    assert caught.value.code() == grpc.StatusCode.UNKNOWN
    assert kubelet.restarts == 2


def test_restart_of_a_stopped_kubelet_is_refused(workdir: Path) -> None:
    kubelet = MockKubelet(workdir / "device-plugins")
    with pytest.raises(RuntimeError, match="not running"):
        kubelet.restart()


def test_stop_removes_kubelet_socket_and_leaves_plugin_sockets(kubelet: MockKubelet, make_plugin: MakePlugin) -> None:
    plugin = make_plugin()
    register(kubelet, plugin)
    kubelet.stop()
    assert not kubelet.socket_path.exists()
    assert not kubelet.pod_resources_socket.exists()
    assert plugin.socket_path.is_socket()
    assert plugin.wait_streams_active(0)
    kubelet.stop()  # idempotent


@pytest.mark.timeout(20)  # without cancellation, stop() would wait out the 60 s dial
@pytest.mark.parametrize("action", ["stop", "restart"])
def test_stop_or_restart_cancels_a_registration_still_dialling(workdir: Path, action: str) -> None:
    kubelet = MockKubelet(workdir / "device-plugins", dial_timeout_s=60).start()
    outcome: list[grpc.StatusCode] = []

    def register_absent_plugin() -> None:
        with grpc.insecure_channel(f"unix:{kubelet.socket_path}") as channel:
            stub = deviceplugin_grpc.RegistrationStub(channel)  # type: ignore[no-untyped-call]
            request = deviceplugin_pb2.RegisterRequest(
                version="v1beta1", endpoint="absent.sock", resource_name="example.com/x"
            )
            try:
                stub.Register(request, timeout=30)
            except grpc.RpcError as error:
                outcome.append(error.code())

    caller = threading.Thread(target=register_absent_plugin)
    caller.start()
    try:
        assert kubelet.wait_for(lambda views: "example.com/x" in views and views["example.com/x"].registration_attempts)
        getattr(kubelet, action)()
        caller.join()
        assert len(outcome) == 1 and outcome[0] != grpc.StatusCode.DEADLINE_EXCEEDED
        view = kubelet.resource("example.com/x")
        assert view is not None and view.registrations == 0
    finally:
        kubelet.stop()
        caller.join()
