"""Register: the kubelet's checks in order, its error texts, the dial-back, and newest-wins."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from gpuslice.kubelet import MockKubelet
from gpuslice.kubelet.registration import plugin_socket_path
from gpuslice.wire import deviceplugin_grpc, deviceplugin_pb2
from tests.kubelet.conftest import MakePlugin, register


def register_raw(kubelet: MockKubelet, request: deviceplugin_pb2.RegisterRequest) -> grpc.RpcError:
    with grpc.insecure_channel(f"unix:{kubelet.socket_path}") as channel, pytest.raises(grpc.RpcError) as caught:
        deviceplugin_grpc.RegistrationStub(channel).Register(request, timeout=15)  # type: ignore[no-untyped-call]
    return caught.value


def test_registration_succeeds_and_reads_options(kubelet: MockKubelet, make_plugin: MakePlugin) -> None:
    plugin = make_plugin(pre_start_required=True)
    register(kubelet, plugin, "example.com/fake")
    view = kubelet.resource("example.com/fake")
    assert view is not None
    assert view.registered and view.endpoint == "fake.sock"
    assert view.options is not None
    assert view.options.get_preferred_allocation_available and view.options.pre_start_required
    assert (view.capacity, view.allocatable, view.registrations, view.registration_attempts) == (4, 4, 1, 1)
    assert kubelet.registration_count("example.com/fake") == 1
    assert plugin.streams_opened == 1


@pytest.mark.parametrize(
    ("version", "text"),
    [
        ("v1alpha", 'requested API version "v1alpha" is not supported by kubelet. Supported version is ["v1beta1"]'),
        ("", 'requested API version "" is not supported by kubelet. Supported version is ["v1beta1"]'),
        ("v1beta2", 'requested API version "v1beta2" is not supported by kubelet. Supported version is ["v1beta1"]'),
    ],
)
def test_unsupported_version_is_refused_with_the_kubelet_text(kubelet: MockKubelet, version: str, text: str) -> None:
    # The version is checked before the name and before any dial: the endpoint need not exist.
    error = register_raw(
        kubelet, deviceplugin_pb2.RegisterRequest(version=version, endpoint="none.sock", resource_name="gpu")
    )
    assert error.code() == grpc.StatusCode.UNKNOWN
    assert error.details() == text
    view = kubelet.resource("gpu")
    assert view is not None and view.registration_attempts == 1 and view.registrations == 0


@pytest.mark.parametrize("name", ["gpu", "kubernetes.io/gpu", "foo.kubernetes.io/x", "nvidia.com/-gpu"])
def test_invalid_resource_name_is_refused_with_the_kubelet_text(kubelet: MockKubelet, name: str) -> None:
    error = register_raw(
        kubelet, deviceplugin_pb2.RegisterRequest(version="v1beta1", endpoint="none.sock", resource_name=name)
    )
    assert error.code() == grpc.StatusCode.UNKNOWN
    assert error.details() == f'the ResourceName "{name}" is invalid'


@pytest.mark.parametrize("name", ["nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-1g.10gb.me"])
def test_valid_resource_names_register(kubelet: MockKubelet, make_plugin: MakePlugin, name: str) -> None:
    register(kubelet, make_plugin(), name)
    assert kubelet.resource(name) is not None


def test_dial_back_failure_names_the_deadline(workdir: Path) -> None:
    with MockKubelet(workdir / "device-plugins", dial_timeout_s=0.3) as kubelet:
        error = register_raw(
            kubelet,
            deviceplugin_pb2.RegisterRequest(version="v1beta1", endpoint="absent.sock", resource_name="example.com/x"),
        )
        assert error.code() == grpc.StatusCode.UNKNOWN
        assert error.details() == "failed to dial device plugin: context deadline exceeded"
        view = kubelet.resource("example.com/x")
        assert view is not None and not view.registered and view.registrations == 0


def test_options_failure_carries_the_plugin_status(kubelet: MockKubelet, make_plugin: MakePlugin) -> None:
    plugin = make_plugin(options_error=grpc.StatusCode.INTERNAL)
    with pytest.raises(grpc.RpcError) as caught:
        plugin.register(kubelet.socket_path, "example.com/fake")
    assert caught.value.code() == grpc.StatusCode.UNKNOWN
    assert caught.value.details() == (
        "failed to get device plugin options: rpc error: code = Internal desc = options are broken"
    )
    assert plugin.streams_opened == 0


def test_newest_registration_replaces_the_old_endpoint(kubelet: MockKubelet, make_plugin: MakePlugin) -> None:
    first = make_plugin("first.sock", ["a0", "a1"])
    second = make_plugin("second.sock", ["b0", "b1", "b2"])
    register(kubelet, first)
    assert first.wait_streams_active(1)
    register(kubelet, second)
    # The kubelet closes the replaced plugin's stream; the view now comes from the newest one.
    assert first.wait_streams_active(0)
    view = kubelet.resource("example.com/fake")
    assert view is not None
    assert view.endpoint == "second.sock" and set(view.devices) == {"b0", "b1", "b2"}
    assert view.registered and view.registrations == 2
    # Health changes of the old plugin no longer reach the kubelet.
    first.set_health("a0", "Unhealthy")
    second.set_health("b0", "Unhealthy")
    assert kubelet.wait_for(resource="example.com/fake", allocatable=2)
    assert set(kubelet.resources()["example.com/fake"].devices) == {"b0", "b1", "b2"}


def test_one_plugin_may_serve_two_resources(kubelet: MockKubelet, make_plugin: MakePlugin) -> None:
    plugin = make_plugin()
    register(kubelet, plugin, "example.com/one")
    register(kubelet, plugin, "example.com/two")
    assert set(kubelet.resources()) == {"example.com/one", "example.com/two"}
    assert plugin.wait_streams_active(2)


@pytest.mark.parametrize(
    ("endpoint", "expected"),
    [("p.sock", "/d/p.sock"), ("/p.sock", "/d/p.sock"), ("sub/../p.sock", "/d/p.sock"), ("../p.sock", "/p.sock")],
)
def test_endpoint_is_joined_like_go_filepath_join(endpoint: str, expected: str) -> None:
    assert plugin_socket_path(Path("/d"), endpoint) == Path(expected)
