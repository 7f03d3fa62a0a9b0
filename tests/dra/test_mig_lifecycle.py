"""DRA claims use the node core's MIG lifecycle: its three placement rules, restore, orphans, refused records."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from gpuslice.discovery import RecordingMigControl
from gpuslice.dra import InMemoryResourceApi
from gpuslice.dra.app import DraApp
from gpuslice.dra.checkpoint import ClaimCheckpoint, ClaimRecord, CreatedMig, PreparedDevice
from gpuslice.dra.claims import ClaimPrepareError, ClaimRef
from gpuslice.dra.names import CHECKPOINT_NAME
from tests.dra.support import DRIVER, NODE, in_process_app

ME_AT_0, ME_AT_1 = "gpu-3-mig-1g10gbme-20-0", "gpu-3-mig-1g10gbme-20-1"  # +me placements, slices apart
THREE_AT_0, ONE_AT_2 = "gpu-3-mig-3g40gb-9-0", "gpu-3-mig-1g10gb-19-2"  # the second lies inside the first
STATIC = "gpu-2-mig-3g40gb-9-0"  # GPU 2's fixed layout: never ours to destroy


def build(root: Path, control: RecordingMigControl | None = None) -> DraApp:
    return in_process_app(root, "version: v1\nflags:\n  migStrategy: dynamic\n", mig=control)


def put(app: DraApp, uid: str, *devices: str) -> ClaimRef:
    results = [{"request": "gpu", "driver": DRIVER, "pool": NODE, "device": name} for name in devices]
    api = app.api
    assert isinstance(api, InMemoryResourceApi)
    api.put_claim(
        {
            "metadata": {"name": f"c-{uid}", "namespace": "default", "uid": uid},
            "status": {"allocation": {"devices": {"results": results, "config": []}}},
        }
    )
    return ClaimRef("default", f"c-{uid}", uid)


def control_of(app: DraApp) -> RecordingMigControl:
    control = app.driver.parts.mig
    assert isinstance(control, RecordingMigControl)
    return control


RULES = [
    ("overlapping slices", [THREE_AT_0], [ONE_AT_2], "memory slices 0-3 are held"),
    ("one +me per GPU", [ME_AT_0], [ME_AT_1], "media engines are held"),
    ("twice in one claim", [], [ONE_AT_2, ONE_AT_2], "already prepared|requested twice"),
]


@pytest.mark.parametrize(("first", "second", "message"), [r[1:] for r in RULES], ids=[r[0] for r in RULES])
def test_the_node_cores_placement_rules_refuse_before_the_hardware_is_asked(
    tmp_path: Path, first: list[str], second: list[str], message: str
) -> None:
    app = build(tmp_path)
    if first:
        app.driver.preparer.prepare(put(app, "u1", *first), 10)
    calls = len(control_of(app).calls)
    with pytest.raises(ClaimPrepareError, match=message):
        app.driver.preparer.prepare(put(app, "u2", *second), 10)
    assert len(control_of(app).calls) == calls, "refused by the rules, not by the device"
    assert set(app.driver.preparer.records()) == ({"u1"} if first else set())


def test_unprepare_frees_the_placement_for_the_next_claim(tmp_path: Path) -> None:
    app = build(tmp_path)
    app.driver.preparer.prepare(put(app, "u1", ME_AT_0), 10)
    app.driver.preparer.unprepare(ClaimRef("default", "c-u1", "u1"), 10)
    assert control_of(app).live_instances([3]) == []
    assert app.driver.preparer.prepare(put(app, "u2", ME_AT_1), 10).migs[0].device == ME_AT_1


def test_a_restart_re_creates_lost_devices_and_leaves_unrecorded_ones_alone(tmp_path: Path) -> None:
    app = build(tmp_path)
    held = app.driver.preparer.prepare(put(app, "u1", THREE_AT_0), 10)
    fresh = RecordingMigControl(app.setup.node)  # a GPU reset: every instance gone
    fresh.create(3, "1g.10gb", 6)  # and one nobody records (killed between create and checkpoint)
    again = build(tmp_path, fresh)
    notes = again.driver.preparer.resume()
    live = fresh.live_instances([3])
    assert sorted((m.profile, m.placement_start) for m in live) == [("1g.10gb", 6), ("3g.40gb", 0)], (
        "ours back; the unrecorded one left alone: a sealed record cannot prove which GPUs are ours"
    )
    (record,) = again.driver.preparer.records().values()
    ours = next(m for m in live if m.profile == "3g.40gb")
    assert record.migs[0].uuid == ours.uuid and record.migs[0].gi == ours.gi and record.devices == held.devices
    assert any("held by no claim; left alone" in note for note in notes)


def _sealed(root: Path, *records: ClaimRecord) -> None:
    ClaimCheckpoint(root / "plugins" / DRIVER / CHECKPOINT_NAME, NODE).save({r.uid: r for r in records})


def _record(uid: str, device: str, mig: CreatedMig, state: str = "PrepareCompleted") -> ClaimRecord:
    prepared = (PreparedDevice(("gpu",), NODE, device, (f"k8s.{DRIVER}/claim={uid}-{device}",)),)
    return ClaimRecord(uid, "default", f"c-{uid}", state, devices=prepared, migs=(mig,))  # type: ignore[arg-type]


def test_records_that_break_the_rules_or_name_a_static_device_are_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    control = build(tmp_path).driver.parts.mig
    assert isinstance(control, RecordingMigControl)
    static = next(m for m in control.live_instances([2]) if m.profile == "3g.40gb")
    forged_static = CreatedMig(STATIC, 2, static.parent_uuid, "3g.40gb", 0, static.gi, static.ci, static.uuid, 1, 2)
    gpu3 = build(tmp_path).setup.node.gpus[3].uuid
    first = CreatedMig(THREE_AT_0, 3, gpu3, "3g.40gb", 0, 1, 0, "MIG-a", 1, 2)
    inside = CreatedMig(ONE_AT_2, 3, gpu3, "1g.10gb", 2, 2, 0, "MIG-b", 3, 4)
    _sealed(
        tmp_path,
        _record("u-static", STATIC, forged_static, "PrepareStarted"),  # its rollback would destroy GPU 2's MIG
        _record("u-first", THREE_AT_0, first),
        _record("u-inside", ONE_AT_2, inside, "PrepareStarted"),  # overlaps u-first
    )
    with caplog.at_level(logging.ERROR, logger="gpuslice.dra"):
        app = build(tmp_path, control)
        app.driver.preparer.resume()
    assert static in control.live_instances([2]), "a static MIG device is never destroyed for a record"
    refused = {
        r.getMessage().split(":")[1].strip().split()[1] for r in caplog.records if "are refused" in r.getMessage()
    }
    assert refused == {"u-static", "u-inside"}
    assert [c for c in control.calls if c[0] == "create" and c[1] == 3] == [("create", 3, "3g.40gb", 0)]
