"""`gpuslice dra` against the mock kubelet over real Unix sockets: register, publish, prepare, unprepare."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import grpc
import pytest

from gpuslice.kubelet.dra_mock import DraAdmissionError, MockDraKubelet
from gpuslice.wire import (
    dra_v1_grpc,
    dra_v1_pb2,
    dra_v1beta1_grpc,
    dra_v1beta1_pb2,
    drahealth_grpc,
    drahealth_pb2,
    pluginregistration_grpc,
)
from gpuslice.wire import pluginregistration_pb2 as registration_pb2
from tests.dra.support import DRIVER, MIG_CLASS, NODE, Node, claim, device_classes, gpu_config, start_plugin
from tests.support.dirs import short_temp_dir
from tests.support.process import finish

DYNAMIC_GPU = "device.attributes['gpu.gpuslice.io'].index == 3"


def profile(name: str) -> str:
    return f"device.attributes['gpu.gpuslice.io'].profile == '{name}'"


@dataclass
class Cluster:
    node: Node
    kubelet: MockDraKubelet

    def create(self, obj: dict[str, Any]) -> str:
        uid: str = self.kubelet.create_claim(obj)["metadata"]["uid"]
        return uid

    def spec(self, uid: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.node.spec_file(uid).read_text())
        return data


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with short_temp_dir("gs") as root:
        node = Node(root)
        kubelet = MockDraKubelet(root, NODE).start()
        for device_class in device_classes():
            kubelet.add_device_class(device_class)
        process = start_plugin(node, kubelet)
        try:
            assert kubelet.watcher.wait_registered(DRIVER, timeout=20), kubelet.watcher.refused
            assert kubelet.wait_for_slices(DRIVER, min_devices=30)
            yield Cluster(node, kubelet)
        finally:
            code, err = finish(process, __import__("signal").SIGTERM)
            kubelet.stop()
            assert code == 0, err[-2000:]


def test_registration_advertises_both_services(cluster: Cluster) -> None:
    plugin = cluster.kubelet.watcher.plugin(DRIVER)
    assert plugin is not None and plugin.version == "v1"
    channel = grpc.insecure_channel(f"unix:{cluster.kubelet.registry_dir / f'{DRIVER}-reg.sock'}")
    info = pluginregistration_grpc.RegistrationStub(channel).GetInfo(registration_pb2.InfoRequest(), timeout=5)  # type: ignore[no-untyped-call]
    channel.close()
    assert (info.type, info.name) == ("DRAPlugin", DRIVER)
    assert list(info.supported_versions) == ["v1.DRAPlugin", "v1beta1.DRAPlugin", "v1alpha1.DRAResourceHealth"]
    assert info.endpoint == str(cluster.kubelet.plugins_dir / DRIVER / "dra.sock")


def test_whole_gpu_claim_gets_its_cdi_spec_and_loses_it_on_unprepare(cluster: Cluster) -> None:
    uid = cluster.create(claim("whole"))
    admission = cluster.kubelet.admit("pod-whole", ["whole"])
    (device,) = admission.claims["whole"]
    assert device.pool == NODE and device.request_names == ("gpu",)
    assert admission.cdi_ids == (f"k8s.{DRIVER}/claim={uid}-{device.device}",)
    spec = cluster.spec(uid)
    assert spec["kind"] == f"k8s.{DRIVER}/claim"
    (entry,) = spec["devices"]
    assert entry["name"] == f"{uid}-{device.device}"
    assert {node["path"] for node in entry["containerEdits"]["deviceNodes"]} == {"/dev/nvidia" + device.device[4:]}
    assert cluster.node.checkpoint()["claims"][uid]["isolation"] == "strong isolation (exclusive GPU)"
    assert cluster.kubelet.delete_pod("pod-whole") == {}
    assert not cluster.node.spec_file(uid).exists()
    assert uid not in cluster.node.checkpoint()["claims"]


def test_dynamic_mig_counters_decide_what_fits(cluster: Cluster) -> None:
    kubelet = cluster.kubelet
    for name in ("big-1", "big-2", "big-3"):
        cluster.create(claim(name, MIG_CLASS, [profile("3g.40gb"), DYNAMIC_GPU]))
    cluster.create(claim("small", MIG_CLASS, [profile("1g.10gb"), DYNAMIC_GPU]))
    first = kubelet.admit("pod-big-1", ["big-1"]).claims["big-1"][0].device
    second = kubelet.admit("pod-big-2", ["big-2"]).claims["big-2"][0].device
    assert {first, second} == {"gpu-3-mig-3g40gb-9-0", "gpu-3-mig-3g40gb-9-4"}
    with pytest.raises(DraAdmissionError, match="does not fit"):
        kubelet.admit("pod-big-3", ["big-3"])
    with pytest.raises(DraAdmissionError, match="does not fit"):
        kubelet.admit("pod-small", ["small"])
    records = cluster.node.checkpoint()["claims"]
    created = [mig for record in records.values() for mig in record["migs"]]
    assert sorted(mig["start"] for mig in created) == [0, 4]
    big_1 = kubelet.claim("big-1")["metadata"]["uid"]  # type: ignore[index]
    paths = [node["path"] for node in cluster.spec(big_1)["devices"][0]["containerEdits"]["deviceNodes"]]
    (mig,) = records[big_1]["migs"]
    caps = [f"/dev/nvidia-caps/nvidia-cap{mig['gi_cap_minor']}", f"/dev/nvidia-caps/nvidia-cap{mig['ci_cap_minor']}"]
    assert paths == ["/dev/nvidia3", *caps], "the nodes of the instance the MIG control created"
    assert kubelet.delete_pod("pod-big-2") == {}
    small = kubelet.admit("pod-small", ["small"]).claims["small"][0].device
    freed = 4 if second.endswith("-4") else 0
    assert small == f"gpu-3-mig-1g10gb-19-{freed}", "the 1g.10gb goes where the freed 3g.40gb was"
    assert kubelet.delete_pod("pod-small") == {} and kubelet.delete_pod("pod-big-1") == {}
    assert not [m for r in cluster.node.checkpoint()["claims"].values() for m in r["migs"]]


def test_mps_claim_starts_a_daemon_with_the_claims_limits(cluster: Cluster) -> None:
    mps = {"defaultActiveThreadPercentage": 30, "defaultPinnedDeviceMemoryLimit": "8Gi"}
    uid = cluster.create(claim("shared", parameters=gpu_config({"strategy": "MPS", "mpsConfig": mps})))
    cluster.kubelet.admit("pod-mps-1", ["shared"])
    cluster.kubelet.admit("pod-mps-2", ["shared"])  # a second pod shares the claim: prepared once
    commands = cluster.node.mps_program.commands()
    assert commands.count("-d") == 1
    assert "set_default_device_pinned_mem_limit 0 8192M" in commands
    assert "set_default_active_thread_percentage 30" in commands
    edits = cluster.spec(uid)["containerEdits"]
    assert "CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps" in edits["env"]
    assert {m["containerPath"] for m in edits["mounts"]} == {"/tmp/nvidia-mps", "/dev/shm"}
    assert cluster.node.checkpoint()["claims"][uid]["isolation"] == "partial isolation (MPS)"
    assert cluster.kubelet.delete_pod("pod-mps-1") == {}
    assert cluster.node.spec_file(uid).exists(), "another pod still uses the claim"
    assert cluster.kubelet.delete_pod("pod-mps-2") == {}
    assert cluster.node.mps_program.commands()[-1] == "quit"
    assert not cluster.node.spec_file(uid).exists()


@pytest.mark.parametrize(
    ("parameters", "message"),
    [
        (gpu_config({"strategy": "MPS", "bogus": 1}), "sharing.bogus: unknown field"),
        (gpu_config({"strategy": "Turbo"}), "sharing.strategy"),
        (gpu_config({"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Forever"}}), "interval"),
        (gpu_config(kind="MigDeviceConfig"), "a MigDeviceConfig does not apply to a gpu device"),
        ({"apiVersion": "example.com/v1", "kind": "GpuConfig"}, "apiVersion"),
    ],
)
def test_bad_configs_get_per_claim_errors_and_the_plugin_keeps_serving(
    cluster: Cluster, parameters: dict[str, Any], message: str
) -> None:
    name = f"bad-{abs(hash(json.dumps(parameters, sort_keys=True))) % 10**8}"
    cluster.create(claim(name, parameters=parameters))
    with pytest.raises(DraAdmissionError) as failure:
        cluster.kubelet.admit(f"pod-{name}", [name])
    assert message in failure.value.errors[name]
    cluster.create(claim(f"good-{name}", parameters=gpu_config({"strategy": "TimeSlicing"})))
    assert cluster.kubelet.admit(f"pod-good-{name}", [f"good-{name}"]).cdi_ids
    assert cluster.kubelet.delete_pod(f"pod-good-{name}") == {}


def _stub(cluster: Cluster, version: str) -> tuple[Any, Any, grpc.Channel]:
    channel = grpc.insecure_channel(f"unix:{cluster.kubelet.plugins_dir / DRIVER / 'dra.sock'}")
    if version == "v1":
        return dra_v1_grpc.DRAPluginStub(channel), dra_v1_pb2, channel  # type: ignore[no-untyped-call]
    return dra_v1beta1_grpc.DRAPluginStub(channel), dra_v1beta1_pb2, channel  # type: ignore[no-untyped-call]


@pytest.mark.parametrize("version", ["v1", "v1beta1"])
def test_raw_calls_answer_every_claim_separately(cluster: Cluster, version: str) -> None:
    stub, pb, channel = _stub(cluster, version)
    uid = cluster.create(claim(f"raw-{version}"))
    cluster.kubelet.admit(f"pod-raw-{version}", [f"raw-{version}"])  # allocated and prepared through the kubelet
    request = pb.NodePrepareResourcesRequest(
        claims=[
            pb.Claim(namespace="default", uid=uid, name=f"raw-{version}"),  # prepared: the cached answer again
            pb.Claim(namespace="default", uid="0000-missing", name="missing"),
            pb.Claim(namespace="default", uid="1111-replaced", name=f"raw-{version}"),
            pb.Claim(namespace="Bad_NS", uid="2222", name="x"),
        ]
    )
    answer = stub.NodePrepareResources(request, timeout=10).claims
    assert set(answer) == {uid, "0000-missing", "1111-replaced", "2222"}
    assert answer[uid].error == "" and answer[uid].devices[0].cdi_device_ids
    assert "does not exist" in answer["0000-missing"].error
    assert "replaced" in answer["1111-replaced"].error
    assert "not a valid Kubernetes name" in answer["2222"].error
    never = stub.NodeUnprepareResources(
        pb.NodeUnprepareResourcesRequest(claims=[pb.Claim(namespace="default", uid="3333", name="never")]), timeout=10
    )
    assert never.claims["3333"].error == "", "a claim never prepared is already unprepared"
    with pytest.raises(grpc.RpcError) as too_many:
        stub.NodePrepareResources(
            pb.NodePrepareResourcesRequest(claims=[pb.Claim(namespace="d", uid=str(i), name="c") for i in range(300)]),
            timeout=10,
        )
    assert too_many.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    channel.close()
    assert cluster.kubelet.delete_pod(f"pod-raw-{version}") == {}


def test_concurrent_prepares_never_share_a_device(cluster: Cluster) -> None:
    names = [f"race-{i}" for i in range(4)]
    uids = {name: cluster.create(claim(name, MIG_CLASS)) for name in names}
    # Every claim is given the same device (as a confused scheduler would): exactly one may get it.
    result = {"request": "gpu", "driver": DRIVER, "pool": NODE, "device": "gpu-3-mig-1g10gb-19-6"}
    for name in names:
        cluster.kubelet.api.store.update(
            "resourceclaims", name, "default", lambda obj: obj.setdefault("status", {}).update(
                allocation={"devices": {"results": [result], "config": []}}
            )
        )  # fmt: skip
    stub, pb, channel = _stub(cluster, "v1")
    answers: dict[str, Any] = {}

    def call(name: str) -> None:
        request = pb.NodePrepareResourcesRequest(claims=[pb.Claim(namespace="default", uid=uids[name], name=name)])
        answers[name] = stub.NodePrepareResources(request, timeout=20).claims[uids[name]]

    threads = [threading.Thread(target=call, args=(name,)) for name in names]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = [name for name in names if not answers[name].error]
    assert len(winners) == 1
    assert all("already prepared for claim" in answers[name].error for name in names if name not in winners)
    (winner,) = winners
    done = stub.NodeUnprepareResources(
        pb.NodeUnprepareResourcesRequest(claims=[pb.Claim(namespace="default", uid=uids[winner], name=winner)]),
        timeout=20,
    )
    assert done.claims[uids[winner]].error == ""
    channel.close()


def test_the_health_stream_lists_every_device(cluster: Cluster) -> None:
    channel = grpc.insecure_channel(f"unix:{cluster.kubelet.plugins_dir / DRIVER / 'dra.sock'}")
    stream = drahealth_grpc.DRAResourceHealthStub(channel).NodeWatchResources(  # type: ignore[no-untyped-call]
        drahealth_pb2.NodeWatchResourcesRequest(), timeout=10
    )
    first = next(stream)
    stream.cancel()
    channel.close()
    published = {d["name"] for s in cluster.kubelet.slices(DRIVER) for d in s["spec"]["devices"]}
    assert {d.device.device_name for d in first.devices} == published
    assert {d.device.pool_name for d in first.devices} == {NODE}
    assert {d.health for d in first.devices} == {drahealth_pb2.HEALTHY}
