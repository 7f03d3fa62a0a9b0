"""NVML discovery against the fake NVML: GPUs, MIG, topology, Xid events and dynamic MIG, without a GPU."""

from __future__ import annotations

import ctypes
import inspect
import queue
import threading
from pathlib import Path
from typing import Any

import pynvml
import pytest

from gpuslice.discovery.nvml import (
    NvmlBackend,
    NvmlDiscoveryError,
    NvmlLibrary,
    NvmlUnavailable,
    cuda_version_text,
    mig_profile_name,
)
from gpuslice.discovery.nvml.fake import (
    INSUFFICIENT_RESOURCES,
    NOT_SUPPORTED,
    UNKNOWN,
    XID_EVENT,
    FakeCi,
    FakeEvent,
    FakeGi,
    FakeGpu,
    FakeNvml,
    FakeNvmlError,
)
from gpuslice.discovery.nvml.nodes import a100_mig, dgx1_v100, dgx_h100
from gpuslice.discovery.xid import XidEvent
from gpuslice.health.targets import event_targets
from gpuslice.topology import PairLink, PcieLevel, Topology

PROTOCOL_CALLS = sorted(
    name for name, value in vars(NvmlLibrary).items() if callable(value) and not name.startswith("_")
)


def fake_calls(fake: FakeNvml) -> list[str]:
    public = ("nvml", "c_nvml", "byref")
    return sorted(n for n in dir(fake) if n.startswith(public) and callable(getattr(fake, n)))


def test_fake_implements_exactly_the_protocol() -> None:
    assert fake_calls(dgx_h100()) == PROTOCOL_CALLS


STRUCT_FIELDS = {
    "c_nvmlGpuInstancePlacement_t": ["start", "size"],
    "c_nvmlGpuFabricInfo_t": ["clusterUuid", "status", "cliqueId", "state"],
}


@pytest.mark.parametrize("name", PROTOCOL_CALLS)
def test_real_binding_has_every_call_with_compatible_arity(name: str) -> None:
    real = getattr(pynvml, name)
    if name == "byref":  # ctypes' builtin, which inspect cannot read a signature from
        assert real is ctypes.byref
        return
    if inspect.isclass(real):  # a ctypes structure, built from its fields
        assert [field[0] for field in vars(real)["_fields_"]] == STRUCT_FIELDS[name]
        return
    ours = [p for p in inspect.signature(getattr(NvmlLibrary, name)).parameters if p != "self"]
    theirs = inspect.signature(real).parameters.values()
    required = [p for p in theirs if p.default is inspect.Parameter.empty]
    assert len(required) <= len(ours) <= len(theirs)


def test_real_binding_error_class() -> None:
    assert issubclass(pynvml.NVMLError, Exception)
    assert pynvml.NVMLError(pynvml.NVML_ERROR_TIMEOUT).value == 10


def test_dgx_h100_gpus_and_versions() -> None:
    node = NvmlBackend(dgx_h100(), driver_root="/nonexistent-root", node_name="dgx").discover()
    assert len(node.gpus) == 8
    assert {g.product_name for g in node.gpus} == {"NVIDIA H100 80GB HBM3"}
    assert {g.memory_mib for g in node.gpus} == {81559}
    assert {str(g.compute_capability) for g in node.gpus} == {"9.0"}
    assert [g.numa_node for g in node.gpus] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert node.gpus[0].pci_bus_id == "00000000:1B:00.0"
    assert [g.device_minor for g in node.gpus] == list(range(8))
    assert not any(g.mig_enabled for g in node.gpus)
    assert len({g.uuid for g in node.gpus}) == 8
    assert (node.name, node.driver_version, node.cuda_driver_version) == ("dgx", "550.127.08", "12.4")
    assert node.extra == {"backend": "nvml"}


def test_nvswitch_pairs_all_get_eighteen_links() -> None:
    pairs = NvmlBackend(dgx_h100()).topology()
    assert len(pairs) == 28
    assert {(p["nvlink"], p["nvswitch"]) for p in pairs.values()} == {(18, True)}
    assert pairs[(0, 3)]["level"] == "node"
    assert pairs[(3, 4)]["level"] == "system"


def test_pair_facts_become_the_topology_model() -> None:
    backend = NvmlBackend(dgx1_v100())
    node = backend.discover()
    links = {
        pair: PairLink(PcieLevel(facts["level"]), facts["nvlink"], facts["nvswitch"])
        for pair, facts in backend.topology().items()
    }
    topology = Topology(tuple(g.index for g in node.gpus), links, tuple(g.uuid for g in node.gpus), source="nvml")
    # scheduling.md §9.3: 0-2 = 100 + 30, 4-5 = 100 + 50, 0-4 = 200 + 10, 2-5 = 10.
    assert [topology.pair_score(*pair) for pair in [(0, 2), (4, 5), (0, 4), (2, 5)]] == [130, 150, 210, 10]


# scheduling.md §9.2, written out independently of the fake's own table.
DGX1_EXPECTED = [
    *[(a, b, 2) for a, b in [(0, 3), (0, 4), (1, 2), (1, 5), (2, 3), (4, 7), (5, 6), (6, 7)]],
    *[(a, b, 1) for a, b in [(0, 1), (0, 2), (1, 3), (2, 6), (3, 7), (4, 5), (4, 6), (5, 7)]],
    *[(a, b, 0) for a, b in [(0, 5), (0, 6), (0, 7), (1, 4), (1, 6), (1, 7), (2, 4), (2, 5), (2, 7), (3, 4)]],
    *[(a, b, 0) for a, b in [(3, 5), (3, 6)]],
]


def test_dgx1_v100_cube_mesh_link_counts() -> None:
    pairs = NvmlBackend(dgx1_v100()).topology()
    assert sorted(pairs) == sorted((a, b) for a, b, _ in DGX1_EXPECTED)
    assert {(a, b): pairs[(a, b)]["nvlink"] for a, b, _ in DGX1_EXPECTED} == {(a, b): n for a, b, n in DGX1_EXPECTED}
    assert not any(p["nvswitch"] for p in pairs.values())
    for gpu in range(8):  # six NVLink-2 links per V100
        assert sum(p["nvlink"] for pair, p in pairs.items() if gpu in pair) == 6


@pytest.mark.parametrize(
    ("pair", "level"), [((0, 1), "single"), ((6, 7), "single"), ((0, 2), "hostbridge"), ((3, 4), "system")]
)
def test_dgx1_v100_pcie_levels(pair: tuple[int, int], level: str) -> None:
    assert NvmlBackend(dgx1_v100()).topology()[pair]["level"] == level


def test_dgx1_v100_has_no_mig() -> None:
    backend = NvmlBackend(dgx1_v100())
    node = backend.discover()
    assert not any(g.mig_enabled for g in node.gpus)
    assert {g.compute_capability.family for g in node.gpus} == {"volta"}
    assert backend.warnings == []  # NOT_SUPPORTED is an answer, not a problem


def test_a100_mig_devices() -> None:
    backend = NvmlBackend(a100_mig(), driver_root="/nonexistent-root")
    mig_gpu, whole = backend.discover().gpus
    assert (mig_gpu.mig_enabled, whole.mig_enabled, whole.mig_instances) == (True, False, ())
    rows = [(m.profile, m.gi, m.ci, m.placement_start, m.placement_size, m.memory_mib) for m in mig_gpu.mig_instances]
    assert rows == [
        ("3g.20gb", 1, 0, 4, 4, 20480),
        ("2g.10gb", 3, 0, 0, 2, 10240),
        ("1g.5gb", 9, 0, 2, 1, 5120),
        ("1g.5gb", 10, 0, 3, 1, 5120),
    ]
    assert [m.device_index for m in mig_gpu.mig_instances] == ["0:0", "0:1", "0:2", "0:3"]
    assert all(m.uuid.startswith("MIG-") and m.parent_uuid == mig_gpu.uuid for m in mig_gpu.mig_instances)
    assert (mig_gpu.mig_instances[0].gi_cap_minor, mig_gpu.mig_instances[0].ci_cap_minor) == (12, 13)
    assert any("mig-minors not found" in w for w in backend.warnings)


def test_mig_cap_minors_come_from_the_driver_root(tmp_path: Path) -> None:
    minors = tmp_path / "proc/driver/nvidia-caps/mig-minors"
    minors.parent.mkdir(parents=True)
    minors.write_text("config 1\nmonitor 2\ngpu0/gi1/access 500\ngpu0/gi1/ci0/access 501\n")
    backend = NvmlBackend(a100_mig(), driver_root=tmp_path)
    first = backend.discover().gpus[0].mig_instances[0]
    assert (first.gi, first.gi_cap_minor, first.ci_cap_minor) == (1, 500, 501)
    assert backend.warnings == []


def _one_mig_gpu(profile_id: int, ci_slices: int) -> FakeNvml:
    gi = FakeGi(profile_id, 0, 4, 3, 20480, {0: FakeCi(ci_slices, "MIG-aaaaaaaa-0000-4000-8000-000000000001")})
    gpu = FakeGpu("GPU-aaaaaaaa-0000-4000-8000-000000000000", "NVIDIA A100-SXM4-40GB", 40960, (8, 0), "0:07:00.0", 0)
    gpu.mig_mode, gpu.gis = 1, {1: gi}
    return FakeNvml([gpu])


def test_compute_instance_smaller_than_its_gpu_instance() -> None:
    node = NvmlBackend(_one_mig_gpu(9, 1)).discover()
    assert node.gpus[0].mig_instances[0].profile == "1c.3g.20gb"


def test_unknown_profile_id_is_named_from_slices_and_memory() -> None:
    backend = NvmlBackend(_one_mig_gpu(42, 3))
    assert backend.discover().gpus[0].mig_instances[0].profile == "3g.20gb"
    assert any("GI profile id 42 is not in the MIG catalogue; named 3g.20gb" in w for w in backend.warnings)


@pytest.mark.parametrize(
    ("gi", "ci", "memory", "total", "name"),
    [
        (1, 1, 4864, 40960, "1g.5gb"),
        (3, 3, 19968, 40960, "3g.20gb"),
        (1, 1, 9856, 81559, "1g.10gb"),
        (1, 1, 19968, 81559, "1g.20gb"),
        (4, 2, 39936, 81559, "2c.4g.40gb"),
    ],
)
def test_profile_name_formula(gi: int, ci: int, memory: int, total: int, name: str) -> None:
    assert mig_profile_name(gi, ci, memory, total) == name


@pytest.mark.parametrize(("raw", "text"), [(12040, "12.4"), (13000, "13.0"), (11080, "11.8")])
def test_cuda_version_text(raw: int, text: str) -> None:
    assert cuda_version_text(raw) == text


def test_numa_falls_back_to_sysfs(tmp_path: Path) -> None:
    fake = dgx_h100()
    fake.gpus[0].numa_node = None  # older driver: NOT_SUPPORTED
    fake.gpus[1].numa_node = None
    numa = tmp_path / "sys/bus/pci/devices/0000:1b:00.0/numa_node"
    numa.parent.mkdir(parents=True)
    numa.write_text("1\n")
    gpus = NvmlBackend(fake, driver_root=tmp_path).discover().gpus
    assert (gpus[0].numa_node, gpus[1].numa_node) == (1, None)


def test_init_failure_is_nvml_unavailable() -> None:
    with pytest.raises(NvmlUnavailable, match="NVML Shared Library Not Found"):
        NvmlBackend(FakeNvml([], init_error=12)).discover()


class _BrokenUuid(FakeNvml):
    def nvmlDeviceGetUUID(self, handle: Any) -> str:
        raise FakeNvmlError(UNKNOWN)


def test_required_fact_failure_names_gpu_and_call() -> None:
    with pytest.raises(NvmlDiscoveryError, match="GPU 0: nvmlDeviceGetUUID failed: Unknown Error"):
        NvmlBackend(_BrokenUuid(dgx_h100().gpus)).discover()


def test_open_and_close_balance_init_and_shutdown() -> None:
    fake = dgx_h100()
    backend = NvmlBackend(fake)
    backend.discover()
    backend.discover()
    assert fake.initialised == 1
    backend.close()
    backend.close()
    assert fake.initialised == 0


def _expected_a100_events(fake: FakeNvml) -> list[XidEvent]:
    gpu0, gpu1 = fake.gpus[0].uuid, fake.gpus[1].uuid
    return [XidEvent(gpu1, 79), XidEvent(gpu0, 94, 1, 0), XidEvent(gpu0, 48)]


def test_xid_stream_skips_ignored_and_non_xid_events() -> None:
    fake = a100_mig()
    stop = threading.Event()
    events = NvmlBackend(fake).watch(stop)
    got = [next(events) for _ in range(3)]
    events.close()
    assert got == _expected_a100_events(fake)
    assert fake.event_sets_open == 0
    assert fake.registered == {0: 0xB, 1: 0xB}  # Xid | double-bit ECC | single-bit ECC
    assert {args[1] for name, args in fake.calls if name == "nvmlEventSetWait"} == {5000}


def test_watch_in_a_thread_stops_within_one_wait() -> None:
    fake = a100_mig()
    backend = NvmlBackend(fake)
    stop = threading.Event()
    out: queue.Queue[XidEvent] = queue.Queue()

    def consume() -> None:
        for event in backend.watch(stop, wait_ms=50):
            out.put(event)

    thread = threading.Thread(target=consume)
    thread.start()
    got = [out.get(timeout=10) for _ in range(3)]
    stop.set()
    thread.join(timeout=10)
    assert not thread.is_alive()
    assert got == _expected_a100_events(fake)
    assert fake.event_sets_open == 0


def test_stopped_watch_yields_nothing() -> None:
    fake = a100_mig()
    stop = threading.Event()
    stop.set()
    assert list(NvmlBackend(fake).watch(stop)) == []
    assert fake.event_sets_open == 0


def test_wait_failure_marks_every_device() -> None:
    fake = a100_mig()
    fake.events = [UNKNOWN]
    stop = threading.Event()
    events = NvmlBackend(fake).watch(stop, wait_ms=1)
    first = next(events)
    stop.set()
    assert list(events) == []
    assert (first.uuid, first.xid, first.all_devices) == (None, 0, True)
    assert "nvmlEventSetWait failed: Unknown Error" in first.reason


def test_registration_failures() -> None:
    fake = a100_mig()
    fake.gpus[0].supported_events = None  # NOT_SUPPORTED: too old, only logged

    class _NoRegister(FakeNvml):
        def nvmlDeviceRegisterEvents(self, handle: Any, event_types: int, event_set: Any) -> None:
            raise FakeNvmlError(INSUFFICIENT_RESOURCES if handle.gpu == 1 else NOT_SUPPORTED)

    broken = _NoRegister(fake.gpus, events=[])
    stop = threading.Event()
    events = NvmlBackend(broken).watch(stop)
    first = next(events)
    stop.set()
    assert list(events) == []
    assert (first.uuid, first.xid) == (fake.gpus[1].uuid, 0)
    assert "cannot register health events: Insufficient Resources" in first.reason


def test_unknown_event_device_marks_every_device() -> None:
    class _NoUuidForEvents(FakeNvml):
        def nvmlDeviceGetUUID(self, handle: Any) -> str:
            if any(name == "nvmlEventSetWait" for name, _ in self.calls):
                raise FakeNvmlError(UNKNOWN)
            return super().nvmlDeviceGetUUID(handle)

    fake = _NoUuidForEvents(a100_mig().gpus, events=[FakeEvent(0, XID_EVENT, 79)])
    stop = threading.Event()
    events = NvmlBackend(fake).watch(stop)
    event = next(events)
    events.close()
    assert (event.uuid, event.xid) == (None, 79)


def test_nvml_events_hit_the_devices_they_name() -> None:
    # Marks go on physical devices: a GPU mark takes its MIG devices along in the HealthStore.
    fake = a100_mig()
    node = NvmlBackend(fake).discover()
    mig_gpu, whole = node.gpus
    scoped, gpu_wide, everything = _expected_a100_events(fake)[1], _expected_a100_events(fake)[2], XidEvent(None, 0)
    assert event_targets(scoped, node) == (mig_gpu.mig_instances[0].uuid,)
    assert event_targets(gpu_wide, node) == (mig_gpu.uuid,)
    assert event_targets(everything, node) == (mig_gpu.uuid, whole.uuid)
    assert event_targets(XidEvent(whole.uuid, 79), node) == (whole.uuid,)
    assert "Xid=94 on " in scoped.describe() and "(GI 1, CI 0)" in scoped.describe()


def test_event_set_failure_marks_every_device() -> None:
    class _NoEventSets(FakeNvml):
        def nvmlEventSetCreate(self) -> Any:
            raise FakeNvmlError(UNKNOWN)

    events = list(NvmlBackend(_NoEventSets(a100_mig().gpus)).watch(threading.Event()))
    assert [(e.uuid, e.xid) for e in events] == [(None, 0)]
    assert "cannot set up health events: Unknown Error" in events[0].reason
