"""NVML as a health source and the NVML recovery probe, against the in-repo fake NVML."""

from __future__ import annotations

import threading
from itertools import islice
from typing import Any

from gpuslice.discovery.nvml import NvmlBackend
from gpuslice.discovery.nvml.fake import UNKNOWN, FakeNvml, FakeNvmlError
from gpuslice.discovery.nvml.health import NvmlHealthSource, NvmlProbe
from gpuslice.discovery.nvml.nodes import a100_mig, dgx_h100
from gpuslice.health import HealthTracker, RecoveryPolicy, XidPolicy
from gpuslice.health.loop import HealthLoop, recovery_policy_for
from gpuslice.sharing import HealthStore


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[int, str]] = []
        self.recovered: list[str] = []

    def health_event(self, xid: int, outcome: str) -> None:
        self.events.append((xid, outcome))

    def device_recovered(self, physical_id: str) -> None:
        self.recovered.append(physical_id)


def test_xid_stream_through_the_policy_marks_the_right_devices() -> None:
    backend = NvmlBackend(a100_mig())
    node = backend.discover()
    store = HealthStore(node)
    recorder = Recorder()
    source = NvmlHealthSource(backend)
    loop = HealthLoop(store, HealthTracker(node, XidPolicy()), source, observer=recorder)
    stop = threading.Event()
    records = source.records(stop)
    for record in islice(records, 5):  # the canned stream holds five Xid events
        loop.handle(record)
    stop.set()
    records.close()
    gpu0, gpu1 = node.gpus
    mig_gi1 = next(m for m in gpu0.mig_instances if m.gi == 1)
    assert set(store.snapshot()) == {gpu1.uuid, mig_gi1.uuid, gpu0.uuid}
    assert recorder.events == [
        (79, "marked_unhealthy"),
        (13, "ignored"),
        (94, "marked_unhealthy"),
        (31, "ignored"),
        (48, "marked_unhealthy"),
    ]
    backend.close()


def test_policy_can_re_enable_an_xid_the_backend_would_drop() -> None:
    backend = NvmlBackend(a100_mig())
    node = backend.discover()
    store = HealthStore(node)
    source = NvmlHealthSource(backend)
    loop = HealthLoop(store, HealthTracker(node, XidPolicy(ignored=frozenset())), source)
    stop = threading.Event()
    records = source.records(stop)
    for record in islice(records, 2):  # Xid 79 on GPU 1, Xid 13 on GPU 0
        loop.handle(record)
    stop.set()
    records.close()
    assert set(store.snapshot()) == {node.gpus[0].uuid, node.gpus[1].uuid}
    backend.close()


def test_probe_passes_for_a_gpu_on_the_bus() -> None:
    backend = NvmlBackend(dgx_h100())
    node = backend.discover()
    passed, detail = NvmlProbe(backend).probe(node.gpus[3].uuid)
    assert passed and "answers NVML queries" in detail
    backend.close()


def test_probe_fails_for_a_gpu_not_on_the_bus() -> None:
    backend = NvmlBackend(dgx_h100())
    assert NvmlProbe(backend).probe("GPU-gone") == (False, "not found on the bus")
    backend.close()


class BrokenMemoryNvml(FakeNvml):
    """A fake whose GPUs no longer answer memory queries (as after Xid 79)."""

    def nvmlDeviceGetMemoryInfo(self, handle: Any) -> Any:
        raise FakeNvmlError(UNKNOWN)


def test_probe_fails_when_nvml_queries_fail() -> None:
    healthy = dgx_h100()
    backend = NvmlBackend(BrokenMemoryNvml(healthy.gpus))
    passed, detail = NvmlProbe(backend).probe(healthy.gpus[0].uuid)
    assert not passed and detail == "NVML query failed: Unknown Error"
    backend.close()


def test_probe_fails_when_nvml_cannot_start() -> None:
    backend = NvmlBackend(FakeNvml(dgx_h100().gpus, init_error=UNKNOWN))
    passed, detail = NvmlProbe(backend).probe(dgx_h100().gpus[0].uuid)
    assert not passed and "could not be initialised" in detail


def test_backend_choices() -> None:
    backend = NvmlBackend(dgx_h100())
    assert isinstance(backend.health_source(), NvmlHealthSource)
    prober = backend.prober()
    assert isinstance(prober, NvmlProbe)
    assert backend.mig_control(backend.discover()) is not None
    assert recovery_policy_for(prober, True) == RecoveryPolicy(True, quiet_s=60.0, probe_interval_s=30.0)
    assert recovery_policy_for(None, True) == RecoveryPolicy(True, quiet_s=0.0)
