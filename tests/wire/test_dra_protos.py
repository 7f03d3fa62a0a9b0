"""The DRA and plugin-registration protos: the kubelet's service names, method paths and field numbers."""

from __future__ import annotations

import pytest

from gpuslice.wire import dra_v1_pb2, dra_v1beta1_pb2, pluginregistration_pb2

DRA_METHODS = {"NodePrepareResources", "NodeUnprepareResources"}


@pytest.mark.parametrize(
    ("module", "full_name"),
    [
        (dra_v1_pb2, "k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin"),
        (dra_v1beta1_pb2, "k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin"),
    ],
)
def test_dra_service_names_are_the_kubelets(module: object, full_name: str) -> None:
    service = module.DESCRIPTOR.services_by_name["DRAPlugin"]  # type: ignore[attr-defined]
    assert service.full_name == full_name
    assert {method.name for method in service.methods} == DRA_METHODS


def test_registration_service_is_pluginregistration() -> None:
    service = pluginregistration_pb2.DESCRIPTOR.services_by_name["Registration"]
    assert service.full_name == "pluginregistration.Registration"
    assert {method.name for method in service.methods} == {"GetInfo", "NotifyRegistrationStatus"}


def _field(number: int, text: str) -> bytes:
    data = text.encode()
    return bytes([number << 3 | 2, len(data)]) + data  # wire type 2 (length-delimited), short lengths only


@pytest.mark.parametrize("module", [dra_v1_pb2, dra_v1beta1_pb2])
def test_claim_and_device_encode_with_the_kubelets_field_numbers(module: object) -> None:
    claim = module.Claim(namespace="default", uid="u1", name="c")  # type: ignore[attr-defined]
    assert claim.SerializeToString() == _field(1, "default") + _field(2, "u1") + _field(3, "c")
    device = module.Device(  # type: ignore[attr-defined]
        request_names=["gpu"], pool_name="node-a", device_name="gpu-0", cdi_device_ids=["k/c=x"]
    )
    expected = _field(1, "gpu") + _field(2, "node-a") + _field(3, "gpu-0") + _field(4, "k/c=x")
    assert device.SerializeToString() == expected
    failed = module.NodePrepareResourceResponse(error="boom")  # type: ignore[attr-defined]
    assert failed.SerializeToString() == _field(2, "boom")


def test_plugin_info_encodes_with_the_kubelets_field_numbers() -> None:
    info = pluginregistration_pb2.PluginInfo(
        type="DRAPlugin", name="gpu.nvidia.com", endpoint="/e", supported_versions=["v1.DRAPlugin"]
    )
    expected = _field(1, "DRAPlugin") + _field(2, "gpu.nvidia.com") + _field(3, "/e") + _field(4, "v1.DRAPlugin")
    assert info.SerializeToString() == expected
    status = pluginregistration_pb2.RegistrationStatus(plugin_registered=True, error="e")
    assert status.SerializeToString() == b"\x08\x01" + _field(2, "e")


def test_health_service_is_v1alpha1_with_the_kubelets_numbers() -> None:
    from gpuslice.wire import drahealth_pb2

    service = drahealth_pb2.DESCRIPTOR.services_by_name["DRAResourceHealth"]
    assert service.full_name == "v1alpha1.DRAResourceHealth"
    assert [m.name for m in service.methods] == ["NodeWatchResources"]
    health = drahealth_pb2.DeviceHealth(
        device=drahealth_pb2.DeviceIdentifier(pool_name="p", device_name="d"), health=drahealth_pb2.UNHEALTHY
    )
    assert health.SerializeToString() == bytes([0x0A, 6]) + _field(1, "p") + _field(2, "d") + b"\x10\x02"
