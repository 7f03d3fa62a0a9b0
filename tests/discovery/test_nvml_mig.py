"""Dynamic MIG: create and destroy GPU+compute instances through the fake NVML, and the recording fake."""

from __future__ import annotations

from typing import Any

import pytest

from gpuslice.discovery import FakeBackend, MigControl, RecordingMigControl
from gpuslice.discovery.nvml import MigControlError, NvmlBackend, NvmlMigControl
from gpuslice.discovery.nvml.fake import INSUFFICIENT_RESOURCES, FakeNvml, FakeNvmlError
from gpuslice.discovery.nvml.nodes import a100_mig


def _mutating_calls(fake: FakeNvml) -> list[tuple[str, tuple[Any, ...]]]:
    wanted = ("Create", "Destroy", "GetComputeInstanceProfileInfo")
    return [(name, args) for name, args in fake.calls if any(w in name for w in wanted)]


def test_destroy_then_create_at_a_placement() -> None:
    fake = a100_mig()
    backend = NvmlBackend(fake, driver_root="/nonexistent-root")
    control: MigControl = NvmlMigControl(backend)
    control.destroy(0, 10, 0)  # the 1g.5gb at slice 3
    created = control.create(0, "1g.5gb", 3)
    assert (created.profile, created.placement_start, created.placement_size, created.ci) == ("1g.5gb", 3, 1, 0)
    assert created.uuid.startswith("MIG-")
    calls = [(name, args[1:]) for name, args in _mutating_calls(fake)]
    assert calls == [
        ("nvmlComputeInstanceDestroy", ()),
        ("nvmlGpuInstanceDestroy", ()),
        ("nvmlDeviceCreateGpuInstanceWithPlacement", (19, (3, 1))),
        ("nvmlGpuInstanceGetComputeInstanceProfileInfo", (0, 0)),
        ("nvmlGpuInstanceCreateComputeInstance", (0,)),
    ]
    profiles = sorted(m.profile for m in backend.discover().gpus[0].mig_instances)
    assert profiles == ["1g.5gb", "1g.5gb", "2g.10gb", "3g.20gb"]


def test_create_on_a_full_gpu_names_the_reason() -> None:
    control = NvmlMigControl(NvmlBackend(a100_mig()))
    with pytest.raises(
        MigControlError, match=r"GPU 0 \(GPU-.*\): 1g.5gb at slice 3: cannot create GPU instance: Insuff"
    ):
        control.create(0, "1g.5gb", 3)


@pytest.mark.parametrize(
    ("gpu", "profile", "start", "message"),
    [
        (1, "1g.5gb", 0, "MIG mode is not enabled"),
        (0, "9g.99gb", 0, "MIG profile '9g.99gb' does not exist on A100-40GB"),
        (0, "3g.20gb", 2, r"allowed starts are \[0, 4\]"),
    ],
)
def test_bad_requests_are_refused_before_nvml(gpu: int, profile: str, start: int, message: str) -> None:
    fake = a100_mig()
    with pytest.raises(MigControlError, match=message):
        NvmlMigControl(NvmlBackend(fake)).create(gpu, profile, start)
    assert _mutating_calls(fake) == []


def test_failed_compute_instance_rolls_back_the_gpu_instance() -> None:
    class _NoComputeInstances(FakeNvml):
        def nvmlGpuInstanceCreateComputeInstance(self, gpu_instance: Any, profile_id: int) -> Any:
            raise FakeNvmlError(INSUFFICIENT_RESOURCES)

    fake = _NoComputeInstances(a100_mig().gpus)
    control = NvmlMigControl(NvmlBackend(fake))
    control.destroy(0, 1, 0)  # frees slices 4-7
    with pytest.raises(MigControlError, match="cannot create compute instance"):
        control.create(0, "3g.20gb", 4)
    assert 1 not in fake.gpus[0].gis and len(fake.gpus[0].gis) == 3
    assert [name for name, _ in _mutating_calls(fake)][-1] == "nvmlGpuInstanceDestroy"


def test_destroy_unknown_instance() -> None:
    with pytest.raises(MigControlError, match="GPU 0: GI 7/CI 0: cannot find GPU instance: Not Found"):
        NvmlMigControl(NvmlBackend(a100_mig())).destroy(0, 7, 0)


def test_recording_fake_validates_and_records() -> None:
    node = FakeBackend.from_ref("preset:h100x4-mig").discover()
    control: MigControl = RecordingMigControl(node)
    with pytest.raises(MigControlError, match="does not fit at slice 0"):
        control.create(0, "1g.10gb", 0)  # seven 1g.10gb already fill GPU 0
    first = node.gpus[0].mig_instances[0]
    control.destroy(0, first.gi, first.ci)
    created = control.create(0, "1g.10gb", first.placement_start)
    assert (created.gi, created.profile, created.placement_start) == (first.gi, "1g.10gb", first.placement_start)
    assert created.uuid != first.uuid
    assert isinstance(control, RecordingMigControl)
    assert control.calls == [
        ("create", 0, "1g.10gb", 0),
        ("destroy", 0, first.gi, first.ci),
        ("create", 0, "1g.10gb", first.placement_start),
    ]
    with pytest.raises(MigControlError, match="no MIG device GI 14/CI 0"):
        control.destroy(0, 14, 0)
