"""Claim preparation in-process: config precedence, rollback on failure, health, deadlines, slice republishing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuslice.allocation.cdi import CONTROL_NODES, present_control_nodes
from gpuslice.discovery import RecordingMigControl
from gpuslice.dra import ApiError, DraSettings, InMemoryResourceApi, prepare_setup
from gpuslice.dra.app import DraApp
from gpuslice.dra.claims import ClaimPrepareError, ClaimRef, allocation_for
from gpuslice.dra.publish import SliceController
from gpuslice.mps import FakeMpsControl
from tests.dra.support import DRIVER, NODE, NODE_SPEC, gpu_config, in_process_app

MPS = gpu_config({"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 20}})


def allocated(uid: str, devices: list[str], configs: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    results = [{"request": "gpu", "driver": DRIVER, "pool": NODE, "device": name} for name in devices]
    return {
        "metadata": {"name": f"c-{uid}", "namespace": "default", "uid": uid},
        "status": {"allocation": {"devices": {"results": results, "config": configs or []}}},
    }


def opaque(parameters: dict[str, Any], source: str = "FromClaim", requests: list[str] | None = None) -> dict[str, Any]:
    return {"source": source, "requests": requests or [], "opaque": {"driver": DRIVER, "parameters": parameters}}


def test_claim_configs_override_class_configs_and_other_drivers_are_ignored() -> None:
    claim = allocated("u1", ["gpu-0"])
    claim["status"]["allocation"]["devices"]["config"] = [
        opaque(MPS, "FromClass"),
        {"source": "FromClaim", "opaque": {"driver": "other.example.com", "parameters": {"anything": True}}},
        opaque(gpu_config({"strategy": "TimeSlicing"}), "FromClaim", ["gpu"]),
    ]
    (device,) = allocation_for(claim, ClaimRef("default", "c-u1", "u1"), DRIVER)
    assert device.config is not None and device.config.sharing is not None
    assert device.config.sharing.strategy == "TimeSlicing"


@pytest.mark.parametrize(
    ("claim", "message"),
    [
        ({"metadata": {"uid": "other"}}, "replaced"),
        ({"metadata": {"uid": "u1"}, "status": {}}, "is not allocated"),
        (allocated("u1", []), "has no device of driver"),
        (allocated("u1", [f"gpu-{i}" for i in range(33)]), "at most 32"),
        (
            allocated("u1", ["gpu-0"], [opaque({"apiVersion": "resource.nvidia.com/v1beta1", "x": "y" * 11000})]),
            "at most 10240 are allowed",
        ),
    ],
)
def test_unusable_claims_are_refused_by_name(claim: dict[str, Any], message: str) -> None:
    with pytest.raises(ClaimPrepareError, match=message):
        allocation_for(claim, ClaimRef("default", "c-u1", "u1"), DRIVER)


@pytest.fixture
def app(tmp_path: Path) -> DraApp:
    config = f"version: v1\nflags:\n  migStrategy: dynamic\n  mpsRoot: {tmp_path / 'mps'}\n"
    return in_process_app(tmp_path, config, mps_control=FakeMpsControl(fail_on="set_default_active"))


def test_a_failed_step_undoes_the_earlier_ones(app: DraApp) -> None:
    api = app.api
    assert isinstance(api, InMemoryResourceApi)
    api.put_claim(allocated("u1", ["gpu-3-mig-3g40gb-9-0"], [opaque(gpu_config(kind="MigDeviceConfig"))]))
    claim = allocated("u2", ["gpu-0"], [opaque(MPS)])
    api.put_claim(claim)
    app.driver.preparer.prepare(ClaimRef("default", "c-u1", "u1"), 10)
    mig = app.driver.parts.mig
    assert isinstance(mig, RecordingMigControl)
    assert len(mig.live_instances([3])) == 1
    with pytest.raises(ClaimPrepareError, match="MPS daemon"):
        app.driver.preparer.prepare(ClaimRef("default", "c-u2", "u2"), 10)
    assert set(app.driver.preparer.records()) == {"u1"}, "the failed claim leaves no record"
    assert not list(app.settings.cdi_dir.glob("*u2*"))
    app.driver.preparer.unprepare(ClaimRef("default", "c-u1", "u1"), 10)
    assert mig.live_instances([3]) == [] and app.driver.preparer.records() == {}


def test_unhealthy_devices_leave_the_pool_and_cannot_be_prepared(app: DraApp) -> None:
    api = app.api
    assert isinstance(api, InMemoryResourceApi)
    controller = SliceController(api, app.plugin.pool_spec(), app.plugin.published_devices, resync_s=60)
    controller.sync()
    before = controller.generation
    gpu0 = app.setup.node.gpus[0].uuid
    app.driver.health.mark_unhealthy(gpu0, "Xid 79")
    assert controller.sync() and controller.generation == before + 1
    names = {d["name"] for s in api.slices.values() for d in s["spec"]["devices"]}
    assert "gpu-0" not in names and "gpu-1" in names
    assert not controller.sync(), "nothing changed: nothing written"
    api.put_claim(allocated("u3", ["gpu-0"]))
    with pytest.raises(ClaimPrepareError, match="unhealthy"):
        app.driver.preparer.prepare(ClaimRef("default", "c-u3", "u3"), 10)
    controller.delete_all()
    assert api.slices == {}


def test_no_time_left_means_nothing_is_done(app: DraApp) -> None:
    api = app.api
    assert isinstance(api, InMemoryResourceApi)
    api.put_claim(allocated("u4", ["gpu-3-mig-1g10gb-19-0"]))
    with pytest.raises(ClaimPrepareError, match="ran out of time"):
        app.driver.preparer.prepare(ClaimRef("default", "c-u4", "u4"), 0)
    assert app.driver.preparer.records() == {}


def test_a_kubelet_restart_wipe_is_noticed_and_repaired(app: DraApp) -> None:
    api = app.api
    assert isinstance(api, InMemoryResourceApi)
    controller = SliceController(api, app.plugin.pool_spec(), app.plugin.published_devices)
    controller.sync()
    generation = controller.generation
    api.slices.clear()
    assert controller.sync() and controller.generation == generation + 1 and api.slices


def test_claim_specs_carry_the_drivers_files_and_the_base_spec_its_hooks(tmp_path: Path) -> None:
    from gpuslice.discovery.driver_files_fake import build_fake_driver_root
    from gpuslice.dra.cdi import base_cdi_id, base_spec_file_name, write_base_spec

    spec = tmp_path / "node.yaml"
    spec.write_text(NODE_SPEC)
    root = build_fake_driver_root(tmp_path / "driver-root", version="550.127.08")
    overrides = {"flags.nvidiaDriverRoot": str(root), "flags.plugin.containerDriverRoot": str(root)}
    setup = prepare_setup("fake", str(spec), None, overrides=overrides)
    settings = DraSettings(plugins_dir=tmp_path / "plugins", registry_dir=tmp_path / "reg", cdi_dir=tmp_path / "cdi")
    app = DraApp(setup, settings, InMemoryResourceApi())
    api = app.api
    assert isinstance(api, InMemoryResourceApi)
    api.put_claim(allocated("u5", ["gpu-0"]))
    record = app.driver.preparer.prepare(ClaimRef("default", "c-u5", "u5"), 10)
    assert record.cdi_spec is not None
    edits = json.loads(Path(record.cdi_spec).read_text())["containerEdits"]
    assert any(m["containerPath"].endswith("libcuda.so.550.127.08") for m in edits["mounts"])
    assert "hooks" not in edits, "hooks run once per container: they are in the base spec, not per claim"
    assert write_base_spec(settings.cdi_dir, DRIVER, app.driver.parts.driver_edits) == (base_cdi_id(DRIVER),)
    base = json.loads((settings.cdi_dir / base_spec_file_name(DRIVER)).read_text())
    assert any("update-ldcache" in hook["args"] for hook in base["containerEdits"]["hooks"])


def test_an_api_server_that_is_not_there_yet_is_waited_for(app: DraApp) -> None:
    api = app.api
    assert isinstance(api, InMemoryResourceApi)
    api.served = ()
    controller = SliceController(api, app.plugin.pool_spec, app.plugin.published_devices)
    with pytest.raises(ApiError):
        controller.sync()
    controller.delete_all()  # nothing was published: nothing to delete, and no error
    api.served = ("v1beta1",)
    assert controller.sync() and controller.pool.api_version == "v1beta1"
    assert all(obj["apiVersion"] == "resource.k8s.io/v1beta1" for obj in api.slices.values())


def test_a_time_slice_interval_is_set_for_the_claim_and_reset_after(app: DraApp) -> None:
    from gpuslice.discovery import RecordingTimeSlice

    api = app.api
    assert isinstance(api, InMemoryResourceApi)
    long = gpu_config({"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}})
    api.put_claim(allocated("u6", ["gpu-1"], [opaque(long)]))
    record = app.driver.preparer.prepare(ClaimRef("default", "c-u6", "u6"), 10)
    control = app.driver.parts.timeslice
    assert isinstance(control, RecordingTimeSlice)
    gpu1 = app.setup.node.gpus[1].uuid
    assert control.levels == {gpu1: 3} and record.isolation == "no isolation (time-slicing)"
    app.driver.preparer.unprepare(ClaimRef("default", "c-u6", "u6"), 10)
    assert control.levels == {gpu1: 0}


def test_claim_specs_hide_the_nodes_gpus_from_the_legacy_runtime(app: DraApp) -> None:
    # Without void a CUDA image's NVIDIA_VISIBLE_DEVICES=all would make the legacy runtime inject every GPU.
    api = app.api
    assert isinstance(api, InMemoryResourceApi)
    api.put_claim(allocated("u7", ["gpu-0"]))
    record = app.driver.preparer.prepare(ClaimRef("default", "c-u7", "u7"), 10)
    assert record.cdi_spec is not None
    edits = json.loads(Path(record.cdi_spec).read_text())["containerEdits"]
    assert edits["env"][0] == "NVIDIA_VISIBLE_DEVICES=void"
    # the fake backend's /dev is imaginary: every control node counts as present, as for the device plugin
    assert [node["path"] for node in edits["deviceNodes"]] == list(CONTROL_NODES)


def test_claim_specs_list_only_the_control_nodes_the_node_has() -> None:
    from gpuslice.discovery.nodespec import load_node_spec
    from gpuslice.dra.cdi import ClaimDeviceEdits, ClaimEdits, claim_spec

    gpu = load_node_spec("preset:h100x4").node.gpus[0]
    present = present_control_nodes(lambda path: path != "/dev/nvidia-modeset")
    spec = claim_spec(DRIVER, "u8", [ClaimDeviceEdits("gpu-0", gpu, None)], ClaimEdits(), control_nodes=present)
    nodes = [node["path"] for node in spec["containerEdits"]["deviceNodes"]]
    assert nodes == ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"]
    assert spec["containerEdits"]["env"] == ["NVIDIA_VISIBLE_DEVICES=void"]
