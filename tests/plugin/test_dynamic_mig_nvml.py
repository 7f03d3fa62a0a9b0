"""Dynamic MIG through the fake NVML: real create/destroy calls, and a restart that keeps its own instances."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpuslice.discovery.nvml import NvmlBackend, NvmlMigControl
from gpuslice.discovery.nvml.fake import FakeGpu, FakeNvml
from gpuslice.kubelet import MockKubelet
from gpuslice.plugin import PluginManager
from gpuslice.plugin.dynamic_runtime import DynamicMigRuntime
from tests.support.plugin import build_app

WAIT_S = 10.0
ONE = "nvidia.com/mig-1g.5gb"
THREE = "nvidia.com/mig-3g.20gb"
CONFIG = "flags: {migStrategy: dynamic}"
A100 = "GPU-a1000000-0000-4000-8000-000000000000"


def _mig_calls(fake: FakeNvml) -> list[tuple[str, tuple[Any, ...]]]:
    wanted = ("CreateGpuInstance", "Destroy")
    return [(name, args[1:]) for name, args in fake.calls if any(w in name for w in wanted)]


def _plugin(fake: FakeNvml, kubelet: MockKubelet, checkpoint: Path) -> tuple[PluginManager, DynamicMigRuntime]:
    """As `gpuslice plugin --backend nvml` builds it: discover, claimed GPUs from the checkpoint, then the runtime."""
    backend = NvmlBackend(fake, driver_root="/nonexistent-root")
    app = build_app(
        checkpoint.parent,
        CONFIG,
        kubelet,
        backend=backend,
        mig_checkpoint=str(checkpoint),
        release_poll_s=0.05,
    )
    runtime = app.dynamic_mig
    assert runtime is not None and isinstance(runtime.dynamic.control, NvmlMigControl)
    app.manager.start()
    return app.manager, runtime


def test_nvml_creates_destroys_and_a_restart_keeps_its_own_instances(kubelet: MockKubelet, workdir: Path) -> None:
    fake = FakeNvml([FakeGpu(A100, "NVIDIA A100-SXM4-40GB", 40960, (8, 0), "00000000:07:00.0", 0, 0, mig_mode=1)])
    checkpoint = workdir / "ckpt"
    manager, runtime = _plugin(fake, kubelet, checkpoint)
    try:
        assert kubelet.wait_for(resource=ONE, allocatable=7, timeout=WAIT_S)
        assert kubelet.wait_for(resource=THREE, allocatable=2, timeout=WAIT_S)
        allocation = kubelet.admit_one("big", THREE)
        assert kubelet.wait_for(resource=ONE, allocatable=3, timeout=WAIT_S)
        assert runtime.wait_until_listed()
        assert _mig_calls(fake) == [("nvmlDeviceCreateGpuInstanceWithPlacement", (9, (0, 4)))]
        mig = runtime.geometry.holdings()[0].mig
        assert mig is not None and allocation.envs["NVIDIA_VISIBLE_DEVICES"] == mig.uuid
    finally:
        manager.stop()
    # The process restarts: NVML now reports the GPU with our 3g.20gb on it, and the checkpoint claims the GPU,
    # so it stays dynamic (not a fixed layout), resumes the same geometry and destroys nothing.
    manager, runtime = _plugin(fake, kubelet, checkpoint)
    try:
        assert runtime.last_resume is not None and runtime.last_resume.source == "checkpoint"
        assert runtime.last_resume.orphans_destroyed == 0
        assert [h.mig for h in runtime.geometry.holdings()] == [mig]
        assert kubelet.wait_for(resource=ONE, registered=True, allocatable=3, timeout=WAIT_S)
        kubelet.delete_pod("big")
        assert kubelet.wait_for(resource=ONE, allocatable=7, timeout=WAIT_S)
    finally:
        manager.stop()
    assert [name for name, _ in _mig_calls(fake)] == [
        "nvmlDeviceCreateGpuInstanceWithPlacement",
        "nvmlComputeInstanceDestroy",
        "nvmlGpuInstanceDestroy",
    ]
    assert NvmlBackend(fake, driver_root="/nonexistent-root").discover().gpus[0].mig_instances == ()


def test_the_plugin_shuts_nvml_down_when_it_stops(kubelet: MockKubelet, workdir: Path) -> None:
    fake = FakeNvml([FakeGpu(A100, "NVIDIA A100-SXM4-40GB", 40960, (8, 0), "00000000:07:00.0", 0, 0, mig_mode=1)])
    app = build_app(workdir, CONFIG, kubelet, backend=NvmlBackend(fake, driver_root="/nonexistent-root"))
    with app:
        assert kubelet.wait_for(resource=ONE, allocatable=7, timeout=WAIT_S)
        assert fake.initialised == 1
    assert fake.initialised == 0  # nvmlShutdown for the nvmlInit, as NVIDIA's plugin does on exit
