"""Backend capabilities: each backend says what it offers through the protocol, with honest defaults."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from gpuslice.discovery import (
    Backend,
    FakeBackend,
    IdleBackend,
    NvidiaSmiTimeSlice,
    RecordingMigControl,
    RecordingTimeSlice,
    load_node_spec,
    parse_node_spec,
)
from gpuslice.discovery.health_file import HealthFileSource
from gpuslice.discovery.hostpath import HostPathBackend
from gpuslice.discovery.nvml import NvmlBackend, NvmlHealthSource, NvmlMigControl, NvmlProbe
from gpuslice.discovery.nvml.nodes import dgx_h100
from gpuslice.gpu import Node
from tests.discovery.host_root import build_host_root


class DiscoveryOnly(Backend):
    """A backend that implements discovery alone: every capability keeps its default."""

    name = "discovery-only"

    def discover(self) -> Node:
        return Node(name="bare", gpus=())


def _fake(tmp_path: Path) -> FakeBackend:
    spec = load_node_spec("preset:h100x4")
    return FakeBackend(dataclasses.replace(spec, health_events=tmp_path / "events", topology={"preset": "dgx-h100"}))


NONE = type(None)
# backend, health source type, prober type, MIG control type, time-slice control type, has topology spec,
# assumes device nodes
CASES = [
    ("fake", HealthFileSource, NONE, RecordingMigControl, RecordingTimeSlice, True, True),
    ("nvml", NvmlHealthSource, NvmlProbe, NvmlMigControl, NvidiaSmiTimeSlice, False, False),
    ("hostpath", NONE, NONE, NONE, NvidiaSmiTimeSlice, False, False),
    ("idle", NONE, NONE, NONE, NONE, False, False),
    ("discovery-only", NONE, NONE, NONE, NONE, False, False),
]


def _backend(kind: str, tmp_path: Path) -> Backend:
    if kind == "fake":
        return _fake(tmp_path)
    if kind == "nvml":
        return NvmlBackend(dgx_h100())
    if kind == "hostpath":
        return HostPathBackend(build_host_root(tmp_path / "host"))
    if kind == "idle":
        return IdleBackend("nothing found", "node-a")
    return DiscoveryOnly()


@pytest.mark.parametrize(("kind", "source", "prober", "control", "timeslice", "topology", "device_nodes"), CASES)
def test_each_backend_offers_what_it_has(
    kind: str,
    source: type,
    prober: type,
    control: type,
    timeslice: type,
    topology: bool,
    device_nodes: bool,
    tmp_path: Path,
) -> None:
    backend = _backend(kind, tmp_path)
    assert isinstance(backend, Backend)
    node = backend.discover()
    assert isinstance(backend.health_source(), source)
    assert isinstance(backend.prober(), prober)
    assert isinstance(backend.mig_control(node), control)
    assert isinstance(backend.timeslice_control(), timeslice)
    assert (backend.topology_spec() is not None) is topology
    assert backend.assumes_device_nodes() is device_nodes
    backend.close()  # every backend can be released, and (NVML) asked again afterwards
    assert backend.discover() == node


def test_the_fake_backend_keeps_one_time_slice_control() -> None:
    # a DRA claim sets the level and its unprepare resets it: both must reach the same record
    backend = FakeBackend(load_node_spec("preset:h100x4"))
    control = backend.timeslice_control()
    assert isinstance(control, RecordingTimeSlice) and control is backend.timeslice_control()
    control.set_level("GPU-1", 3)
    assert control.levels == {"GPU-1": 3}


def test_the_fake_mig_control_lists_the_instances_it_holds() -> None:
    h100 = {"model": "NVIDIA H100 80GB HBM3", "memory_mib": 81559, "compute_capability": "9.0", "count": 2, "mig": []}
    node = parse_node_spec({"name": "carve", "gpus": [h100]}).node
    control = RecordingMigControl(node)
    assert control.live_instances([0]) == []
    created = control.create(0, "3g.40gb", 0)
    assert control.live_instances([0, 1]) == [created]
    control.destroy(0, created.gi, created.ci)
    assert control.live_instances([0]) == []
