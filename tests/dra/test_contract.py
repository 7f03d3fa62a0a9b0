"""The ClaimDriver contract (dra.contract) as the GPU driver keeps it, and the kubelet plumbing over any driver."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from pathlib import Path

import grpc
import pytest

from gpuslice.discovery import FakeBackend, RecordingMigControl, RecordingTimeSlice, load_node_spec
from gpuslice.dra import DraApp, DraSettings, DraSetup, InMemoryResourceApi, prepare_setup
from gpuslice.dra.checkpoint import PreparedDevice
from gpuslice.dra.claims import ClaimPrepareError, ClaimRef
from gpuslice.dra.driver import GpuDriver
from gpuslice.dra.health_service import ResourceHealthService
from gpuslice.dra.kubelet_plugin import KubeletPlugin
from gpuslice.gpu import Node
from gpuslice.sharing import HealthStore
from gpuslice.wire import MAX_REQUEST_BYTES, dra_v1_grpc, dra_v1_pb2
from tests.dra.support import NODE_SPEC, gpu_config
from tests.dra.test_prepare import allocated, opaque

TIME_SLICED = gpu_config({"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}})
MIG_CONFIG = gpu_config(kind="MigDeviceConfig")


@dataclasses.dataclass
class DraNode:
    """One node's files, and the hardware state that outlives a plugin process (MIG, time-slice levels)."""

    root: Path
    setup: DraSetup
    settings: DraSettings
    api: InMemoryResourceApi
    mig: RecordingMigControl
    timeslice: RecordingTimeSlice

    def process(self) -> GpuDriver:
        """A fresh plugin process's driver on this node: same checkpoint and hardware, nothing in memory."""
        return GpuDriver(self.setup, self.settings, self.api, mig=self.mig, timeslice=self.timeslice)


@pytest.fixture
def node(tmp_path: Path) -> DraNode:
    spec = tmp_path / "node.yaml"
    spec.write_text(NODE_SPEC)
    config = tmp_path / "config.yaml"
    config.write_text("version: v1\nflags:\n  migStrategy: dynamic\n")
    setup = prepare_setup("fake", str(spec), str(config))
    settings = DraSettings(plugins_dir=tmp_path / "plugins", registry_dir=tmp_path / "reg", cdi_dir=tmp_path / "cdi")
    return DraNode(
        tmp_path, setup, settings, InMemoryResourceApi(), RecordingMigControl(setup.node), RecordingTimeSlice()
    )


def ref(uid: str) -> ClaimRef:
    return ClaimRef("default", f"c-{uid}", uid)


def test_preparing_twice_answers_the_same_and_changes_nothing(node: DraNode) -> None:
    driver = node.process()
    node.api.put_claim(allocated("u1", ["gpu-3-mig-3g40gb-9-0"], [opaque(MIG_CONFIG)]))
    first = driver.prepare(ref("u1"), 10)
    records, specs = driver.preparer.records(), {p: p.read_text() for p in node.settings.cdi_dir.glob("*.json")}
    assert driver.prepare(ref("u1"), 10) == first
    assert driver.preparer.records() == records and len(node.mig.live_instances([3]) or []) == 1
    assert {p: p.read_text() for p in node.settings.cdi_dir.glob("*.json")} == specs


def test_unpreparing_a_claim_not_prepared_succeeds(node: DraNode) -> None:
    driver = node.process()
    driver.unprepare(ref("never"), 10)
    node.api.put_claim(allocated("u1", ["gpu-0"]))
    driver.prepare(ref("u1"), 10)
    driver.unprepare(ref("u1"), 10)
    driver.unprepare(ref("u1"), 10)
    assert driver.preparer.records() == {}


@pytest.mark.parametrize(
    ("held", "wanted", "message"),
    [
        (["gpu-0"], ["gpu-0"], "already prepared for claim u1"),
        (["gpu-3-mig-3g40gb-9-0"], ["gpu-3-mig-1g10gb-19-1"], "memory slices 0-3 are held by GPU-[0-9a-f-]+/3g.40gb@0"),
        (["gpu-3-mig-7g80gb-0-0"], ["gpu-3-mig-3g40gb-9-4"], "are held by GPU-[0-9a-f-]+/7g.80gb@0"),
    ],
)
def test_a_device_in_use_is_refused_to_another_claim(
    node: DraNode, held: list[str], wanted: list[str], message: str
) -> None:
    driver = node.process()
    node.api.put_claim(allocated("u1", held))
    node.api.put_claim(allocated("u2", wanted))
    driver.prepare(ref("u1"), 10)
    with pytest.raises(ClaimPrepareError, match=message):
        driver.prepare(ref("u2"), 10)
    driver.unprepare(ref("u1"), 10)
    assert [device.device for device in driver.prepare(ref("u2"), 10)] == wanted  # free again


def test_cdi_names_are_unique_per_claim_uid(node: DraNode) -> None:
    driver = node.process()
    answers: dict[str, Sequence[PreparedDevice]] = {}
    for uid in ("u1", "u2"):
        node.api.put_claim(allocated(uid, ["gpu-1"], [opaque(TIME_SLICED)]))
        answers[uid] = driver.prepare(ref(uid), 10)
        driver.unprepare(ref(uid), 10)  # the same device, one claim after the other
    names = {uid: {name for device in devices for name in device.cdi_ids} for uid, devices in answers.items()}
    assert all(uid in name for uid, found in names.items() for name in found)
    assert names["u1"].isdisjoint(names["u2"])


def test_another_process_unprepares_what_this_one_prepared(node: DraNode) -> None:
    node.api.put_claim(allocated("u1", ["gpu-3-mig-3g40gb-9-0"], [opaque(MIG_CONFIG)]))
    node.api.put_claim(allocated("u2", ["gpu-1"], [opaque(TIME_SLICED)]))
    first = node.process()
    first.prepare(ref("u1"), 10)
    first.prepare(ref("u2"), 10)
    gpu1 = node.setup.node.gpus[1].uuid
    assert len(node.mig.live_instances([3]) or []) == 1 and node.timeslice.levels == {gpu1: 3}
    del first  # the process ends (SIGKILL: nothing of it runs again)
    second = node.process()
    second.start()
    second.unprepare(ref("u1"), 10)
    second.unprepare(ref("u2"), 10)
    second.stop()
    assert node.mig.live_instances([3]) == [] and node.timeslice.levels == {gpu1: 0}
    assert second.preparer.records() == {} and not list(node.settings.cdi_dir.glob("*.json"))


class TableDriver:
    """A driver for the plumbing alone: answers from a table, a ClaimPrepareError for any other claim."""

    def __init__(self, answers: dict[str, Sequence[PreparedDevice]]) -> None:
        self.answers = answers
        self.unprepared: list[str] = []

    def prepare(self, ref: ClaimRef, budget_s: float) -> Sequence[PreparedDevice]:
        if ref.uid not in self.answers:
            raise ClaimPrepareError(f"claim {ref}: not in the table")
        return self.answers[ref.uid]

    def unprepare(self, ref: ClaimRef, budget_s: float) -> None:
        self.unprepared.append(ref.uid)


@pytest.fixture
def served(workdir: Path) -> Iterator[tuple[KubeletPlugin, TableDriver]]:
    answer = PreparedDevice(("gpu",), "node-a", "dev-0", ("example.com/claim=u1-dev-0",))
    driver = TableDriver({"u1": (answer,)})
    settings = DraSettings(registry_dir=workdir / "reg", plugins_dir=workdir / "plugins")
    pool = ResourceHealthService("node-a", (), HealthStore(Node("node-a", ())))
    plugin = KubeletPlugin(settings, InMemoryResourceApi(), driver, pool)
    plugin.start()
    try:
        yield plugin, driver
    finally:
        plugin.stop()


def test_the_plumbing_serves_any_driver_one_answer_per_claim(served: tuple[KubeletPlugin, TableDriver]) -> None:
    plugin, driver = served
    with grpc.insecure_channel(f"unix:{plugin.settings.dra_socket}") as channel:
        stub = dra_v1_grpc.DRAPluginStub(channel)  # type: ignore[no-untyped-call]
        claims = [dra_v1_pb2.Claim(namespace="default", uid=uid, name=f"c-{uid}") for uid in ("u1", "u2")]
        answer = stub.NodePrepareResources(dra_v1_pb2.NodePrepareResourcesRequest(claims=claims), timeout=10).claims
        undone = stub.NodeUnprepareResources(dra_v1_pb2.NodeUnprepareResourcesRequest(claims=claims), timeout=10)
    assert answer["u1"].error == "" and list(answer["u1"].devices[0].cdi_device_ids) == ["example.com/claim=u1-dev-0"]
    assert answer["u1"].devices[0].device_name == "dev-0" and list(answer["u1"].devices[0].request_names) == ["gpu"]
    assert "not in the table" in answer["u2"].error
    assert set(undone.claims) == {"u1", "u2"} and driver.unprepared == ["u1", "u2"]
    assert plugin.settings.registration_socket.exists()


class ClosingBackend(FakeBackend):
    """The fake backend, counting how often it was released."""

    closed = 0

    def close(self) -> None:
        self.closed += 1


def test_the_dra_process_releases_its_backend_on_exit(node: DraNode, workdir: Path) -> None:
    backend = ClosingBackend(load_node_spec(str(node.root / "node.yaml")))
    setup = dataclasses.replace(node.setup, backend=backend)
    settings = dataclasses.replace(node.settings, registry_dir=workdir / "reg", plugins_dir=workdir / "plugins")
    app = DraApp(setup, settings, node.api)
    app.start()
    assert backend.closed == 0
    app.stop()
    assert backend.closed == 1


def test_the_plumbing_refuses_a_request_over_the_kubelets_size_cap(served: tuple[KubeletPlugin, TableDriver]) -> None:
    plugin, _ = served
    huge = dra_v1_pb2.Claim(namespace="default", uid="u1", name="x" * MAX_REQUEST_BYTES)
    with grpc.insecure_channel(f"unix:{plugin.settings.dra_socket}") as channel:
        stub = dra_v1_grpc.DRAPluginStub(channel)  # type: ignore[no-untyped-call]
        with pytest.raises(grpc.RpcError) as refused:
            stub.NodePrepareResources(dra_v1_pb2.NodePrepareResourcesRequest(claims=[huge]), timeout=10)
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
