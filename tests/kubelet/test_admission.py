"""Pod admission: checks and texts, preferred allocation with top-up, one Allocate, delete frees."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import grpc
import pytest

from gpuslice.kubelet import AdmissionError, MockKubelet
from gpuslice.wire import deviceplugin_pb2
from tests.kubelet.conftest import MakePlugin, register

RESOURCE = "example.com/fake"


def test_admit_calls_preferred_then_allocate_and_keeps_the_response(
    kubelet: MockKubelet, make_plugin: MakePlugin
) -> None:
    plugin = make_plugin()
    register(kubelet, plugin)
    admission = kubelet.admit("pod-a", {RESOURCE: 2})
    allocation = admission.allocations[RESOURCE]
    # The fake prefers the highest IDs; the kubelet took its answer.
    assert allocation.device_ids == ("d3", "d2")
    assert allocation.preferred == ("d3", "d2")
    [preferred] = plugin.preferred_requests
    [request] = preferred.container_requests
    assert list(request.available_deviceIDs) == ["d0", "d1", "d2", "d3"]
    assert list(request.must_include_deviceIDs) == []
    assert request.allocation_size == 2
    assert plugin.allocate_requests == [["d3", "d2"]]
    assert allocation.envs == {"FAKE_DEVICES": "d3,d2"}
    assert admission.envs == {"FAKE_DEVICES": "d3,d2"}
    assert allocation.device_nodes == [("/dev/fake-d3", "/dev/fake-d3", "rw"), ("/dev/fake-d2", "/dev/fake-d2", "rw")]
    assert (admission.pod, admission.namespace, admission.container) == ("pod-a", "default", "main")
    assert kubelet.resources()[RESOURCE].allocated == {"d2", "d3"}
    assert kubelet.resources()[RESOURCE].allocatable == 4  # node allocatable still counts held devices


def test_candidates_exclude_devices_already_held(kubelet: MockKubelet, make_plugin: MakePlugin) -> None:
    plugin = make_plugin()
    register(kubelet, plugin)
    kubelet.admit_one("pod-a", RESOURCE, 2)
    second = kubelet.admit_one("pod-b", RESOURCE, 2)
    assert second.device_ids == ("d1", "d0")
    assert list(plugin.preferred_requests[1].container_requests[0].available_deviceIDs) == ["d0", "d1"]


def _answer(ids: Sequence[str]):  # type: ignore[no-untyped-def]
    return lambda available, must_include, size: list(ids)


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (["d2"], ("d2", "d0", "d1")),  # short: topped up from the lowest free IDs
        ([], ("d0", "d1", "d2")),  # empty: the kubelet picks by itself
        (["zz", "d3", "d3", "d1"], ("d3", "d1", "d0")),  # unknown and duplicate IDs are ignored
        (["d3", "d2", "d1", "d0"], ("d3", "d2", "d1")),  # too long: only the first N are used
    ],
)
def test_preferred_answer_is_intersected_and_topped_up(
    kubelet: MockKubelet, make_plugin: MakePlugin, answer: list[str], expected: tuple[str, ...]
) -> None:
    register(kubelet, make_plugin(prefer=_answer(answer)))
    allocation = kubelet.admit_one("pod-a", RESOURCE, 3)
    assert allocation.device_ids == expected
    assert allocation.preferred == tuple(answer)


def test_no_preferred_call_when_the_plugin_does_not_offer_it(kubelet: MockKubelet, make_plugin: MakePlugin) -> None:
    plugin = make_plugin(prefer=None)
    register(kubelet, plugin)
    allocation = kubelet.admit_one("pod-a", RESOURCE, 2)
    assert allocation.device_ids == ("d0", "d1") and allocation.preferred is None
    assert plugin.preferred_requests == []


def test_pre_start_is_called_when_required(kubelet: MockKubelet, make_plugin: MakePlugin) -> None:
    plugin = make_plugin(pre_start_required=True)
    register(kubelet, plugin)
    allocation = kubelet.admit_one("pod-a", RESOURCE, 1)
    assert plugin.pre_start_requests == [list(allocation.device_ids)]


def test_not_enough_devices_text(kubelet: MockKubelet, make_plugin: MakePlugin) -> None:
    register(kubelet, make_plugin())
    kubelet.admit_one("pod-a", RESOURCE, 3)
    with pytest.raises(AdmissionError) as caught:
        kubelet.admit_one("pod-b", RESOURCE, 2)
    error = caught.value
    assert error.cause == f"requested number of devices unavailable for {RESOURCE}. Requested: 2, Available: 1"
    assert error.message == f"Allocate failed due to {error.cause}, which is unexpected"
    assert error.reason == "UnexpectedAdmissionError"
    assert (error.pod, error.resource, error.code) == ("pod-b", RESOURCE, None)


def test_unregistered_resource_text(kubelet: MockKubelet) -> None:
    with pytest.raises(AdmissionError) as caught:
        kubelet.admit_one("pod-a", "example.com/nothing", 1)
    assert caught.value.cause == "cannot allocate unregistered device example.com/nothing"


def test_no_healthy_devices_text(kubelet: MockKubelet, make_plugin: MakePlugin) -> None:
    plugin = make_plugin(devices=["d0"])
    register(kubelet, plugin)
    plugin.set_health("d0", "Unhealthy")
    assert kubelet.wait_for(resource=RESOURCE, allocatable=0)
    with pytest.raises(AdmissionError) as caught:
        kubelet.admit_one("pod-a", RESOURCE, 1)
    assert caught.value.cause == f"no healthy devices present; cannot allocate unhealthy devices {RESOURCE}"


def test_unhealthy_devices_are_not_candidates(kubelet: MockKubelet, make_plugin: MakePlugin) -> None:
    plugin = make_plugin()
    register(kubelet, plugin)
    plugin.set_health("d3", "Unhealthy")
    assert kubelet.wait_for(resource=RESOURCE, allocatable=3)
    assert kubelet.admit_one("pod-a", RESOURCE, 3).device_ids == ("d2", "d1", "d0")


def test_plugin_allocate_error_becomes_an_admission_error(kubelet: MockKubelet, make_plugin: MakePlugin) -> None:
    plugin = make_plugin()
    register(kubelet, plugin)
    plugin.allocate_error = (grpc.StatusCode.INVALID_ARGUMENT, "device d3 is on fire")
    with pytest.raises(AdmissionError) as caught:
        kubelet.admit_one("pod-a", RESOURCE, 1)
    error = caught.value
    assert error.cause == "rpc error: code = InvalidArgument desc = device d3 is on fire"
    assert str(error) == f"Allocate failed due to {error.cause}, which is unexpected"
    assert (error.code, error.details) == (grpc.StatusCode.INVALID_ARGUMENT, "device d3 is on fire")
    assert kubelet.resources()[RESOURCE].allocated == frozenset()
    assert kubelet.admissions() == []


def test_a_failed_resource_frees_the_others_of_the_container(kubelet: MockKubelet, make_plugin: MakePlugin) -> None:
    register(kubelet, make_plugin(), "example.com/one")
    register(kubelet, make_plugin("two.sock", ["t0"]), "example.com/two")
    with pytest.raises(AdmissionError) as caught:
        kubelet.admit("pod-a", {"example.com/one": 1, "example.com/two": 2})
    assert caught.value.resource == "example.com/two"
    assert all(not view.allocated for view in kubelet.resources().values())


def test_delete_frees_the_devices(kubelet: MockKubelet, make_plugin: MakePlugin) -> None:
    register(kubelet, make_plugin())
    kubelet.admit_one("pod-a", RESOURCE, 4)
    with pytest.raises(AdmissionError):
        kubelet.admit_one("pod-b", RESOURCE, 1)
    assert kubelet.delete_pod("pod-a")
    assert not kubelet.delete_pod("pod-a")
    assert kubelet.resources()[RESOURCE].allocated == frozenset()
    assert len(kubelet.admit_one("pod-b", RESOURCE, 4).device_ids) == 4


def test_pods_are_keyed_by_namespace(kubelet: MockKubelet, make_plugin: MakePlugin) -> None:
    register(kubelet, make_plugin())
    kubelet.admit_one("same", RESOURCE, 1, namespace="a")
    kubelet.admit_one("same", RESOURCE, 1, namespace="b")
    assert kubelet.delete_pod("same", namespace="a")
    assert [(a.namespace, a.pod) for a in kubelet.admissions()] == [("b", "same")]


def test_readmitting_a_container_keeps_its_devices_or_refuses_a_changed_count(
    kubelet: MockKubelet, make_plugin: MakePlugin
) -> None:
    plugin = make_plugin()
    register(kubelet, plugin)
    first = kubelet.admit("pod-a", {RESOURCE: 2})
    again = kubelet.admit("pod-a", {RESOURCE: 2})
    assert again.allocations[RESOURCE].device_ids == first.allocations[RESOURCE].device_ids
    assert len(plugin.allocate_requests) == 1
    with pytest.raises(AdmissionError) as caught:
        kubelet.admit("pod-a", {RESOURCE: 3})
    assert caught.value.cause == (
        f'pod "{first.uid}" container "main" changed request for resource "{RESOURCE}" from 2 to 3'
    )


def test_zero_is_skipped_and_bad_counts_are_refused(kubelet: MockKubelet) -> None:
    assert kubelet.admit("pod-a", {RESOURCE: 0}).allocations == {}
    with pytest.raises(ValueError, match="whole number"):
        kubelet.admit("pod-a", {RESOURCE: -1})
    with pytest.raises(ValueError, match="pod name"):
        kubelet.admit("", {RESOURCE: 1})


def test_concurrent_admissions_never_share_a_device(kubelet: MockKubelet, make_plugin: MakePlugin) -> None:
    devices = [f"d{i:02d}" for i in range(16)]
    register(kubelet, make_plugin(devices=devices))
    results: list[tuple[str, ...]] = []
    failures: list[str] = []
    lock = threading.Lock()

    def admit(index: int) -> None:
        try:
            ids = kubelet.admit_one(f"pod-{index}", RESOURCE, 3).device_ids
            with lock:
                results.append(ids)
        except AdmissionError as error:
            with lock:
                failures.append(error.cause)

    threads = [threading.Thread(target=admit, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    handed_out = [device for ids in results for device in ids]
    assert len(handed_out) == len(set(handed_out)) == 15
    assert len(failures) == 3 and all("Requested: 3, Available: 1" in text for text in failures)


def test_raw_stub_reaches_the_plugin_for_malformed_requests(kubelet: MockKubelet, make_plugin: MakePlugin) -> None:
    register(kubelet, make_plugin())
    stub = kubelet.plugin_stub(RESOURCE)
    cases = [
        ([], "empty device list"),
        (["d0", "d0"], "device d0 requested twice"),
        (["nope"], "unknown device nope"),
    ]
    for ids, text in cases:
        request = deviceplugin_pb2.AllocateRequest(
            container_requests=[deviceplugin_pb2.ContainerAllocateRequest(devices_ids=ids)]
        )
        with pytest.raises(grpc.RpcError) as caught:
            stub.Allocate(request, timeout=5)
        assert (caught.value.code(), caught.value.details()) == (grpc.StatusCode.INVALID_ARGUMENT, text)
    assert kubelet.admit_one("pod-a", RESOURCE, 1).device_ids == ("d3",)  # the plugin still serves
    with pytest.raises(LookupError):
        kubelet.plugin_stub("example.com/unknown")
