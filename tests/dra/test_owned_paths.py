"""A checkpoint record names only what the plugin makes; a start after a kill removes only our own leftovers."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

import pytest

from gpuslice.dra import InMemoryResourceApi
from gpuslice.dra.app import DraApp
from gpuslice.dra.cdi import spec_file_name
from gpuslice.dra.checkpoint import ClaimCheckpoint, ClaimRecord, PreparedDevice
from gpuslice.dra.claims import ClaimRef
from gpuslice.dra.names import CHECKPOINT_NAME
from gpuslice.mps import FakeMpsControl
from tests.dra.support import DRIVER, NODE, gpu_config, in_process_app

UID = "0b7c7d7e-1111-2222-3333-444455556666"
MPS = gpu_config({"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 20}})


def build(root: Path) -> DraApp:
    config = f"version: v1\nflags:\n  migStrategy: dynamic\n  mpsRoot: {root / 'mps'}\n"
    return in_process_app(root, config, mps_control=FakeMpsControl())


def checkpoint_of(root: Path) -> ClaimCheckpoint:
    return ClaimCheckpoint(root / "plugins" / DRIVER / CHECKPOINT_NAME, NODE)


def claim(uid: str, device: str, configs: list[object]) -> dict[str, object]:
    results = [{"request": "gpu", "driver": DRIVER, "pool": NODE, "device": device}]
    return {
        "metadata": {"name": "c", "namespace": "default", "uid": uid},
        "status": {"allocation": {"devices": {"results": results, "config": configs}}},
    }


def test_a_sealed_record_naming_outside_paths_touches_nothing_outside(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    outside = tmp_path / "outside"
    victim_dir = outside / "precious"
    victim_dir.mkdir(parents=True)
    (victim_dir / "data").write_text("keep me")
    victim_file = outside / "passwd"
    victim_file.write_text("keep me too")
    record = ClaimRecord(
        UID,
        "default",
        "c",
        "PrepareStarted",  # rolled back at start: today's code deleted what these fields said
        cdi_spec=str(victim_file),
        mps_daemon=str(victim_dir),
        env={"LD_PRELOAD": "/outside/evil.so"},
        mounts=(("/host", "/"),),
    )
    checkpoint_of(tmp_path).save({UID: record})  # a correct checksum: anyone can compute one
    app = build(tmp_path)
    with caplog.at_level(logging.ERROR, logger="gpuslice.dra"):
        app.driver.preparer.resume()
    assert victim_file.read_text() == "keep me too" and (victim_dir / "data").read_text() == "keep me"
    refused = [r.getMessage() for r in caplog.records if "never makes" in r.getMessage()]
    assert len(refused) == 1 and str(victim_file) in refused[0] and str(victim_dir) in refused[0]
    assert "LD_PRELOAD" in refused[0] and app.driver.preparer.records() == {}, "rolled back with our own paths only"


def test_a_completed_record_keeps_only_derived_edits(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    app = build(tmp_path)
    api = app.api
    assert isinstance(api, InMemoryResourceApi)
    api.put_claim(claim(UID, "gpu-0", [{"source": "FromClaim", "requests": [],
                                        "opaque": {"driver": DRIVER, "parameters": MPS}}]))  # fmt: skip
    good = app.driver.preparer.prepare(ClaimRef("default", "c", UID), 10)
    assert good.mps_daemon == str(tmp_path / "mps" / UID) and good.cdi_spec == str(
        tmp_path / "cdi" / spec_file_name(DRIVER, UID)
    )
    forged = replace(
        good,
        mounts=((good.mounts[0][0], "/etc"), good.mounts[1]),
        devices=(PreparedDevice(("gpu",), NODE, "gpu-0", ("k8s.gpu.gpuslice.io/claim=other-gpu-0",)),),
    )
    checkpoint_of(tmp_path).save({UID: forged})
    with caplog.at_level(logging.ERROR, logger="gpuslice.dra"):
        again = build(tmp_path)
    assert again.driver.preparer.records() == {UID: good}, "the derived mounts and CDI IDs, not the recorded ones"
    assert any("/etc" in r.getMessage() and "another claim" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    "record",
    [
        ClaimRecord("../../etc", "default", "c", "PrepareStarted", cdi_spec="/etc/passwd"),
        ClaimRecord(UID, "Not A Namespace", "c", "PrepareStarted", mps_daemon="/"),
    ],
    ids=["uid-with-dots", "bad-namespace"],
)
def test_a_record_that_is_no_claim_reference_is_ignored(
    tmp_path: Path, record: ClaimRecord, caplog: pytest.LogCaptureFixture
) -> None:
    checkpoint_of(tmp_path).save({record.uid: record})
    with caplog.at_level(logging.ERROR, logger="gpuslice.dra"):
        app = build(tmp_path)
    assert app.driver.preparer.records() == {}
    assert any("refused a record" in r.getMessage() for r in caplog.records)


def test_a_start_after_a_kill_removes_only_our_own_leftovers(tmp_path: Path) -> None:
    app = build(tmp_path)
    api = app.api
    assert isinstance(api, InMemoryResourceApi)
    api.put_claim(claim(UID, "gpu-1", []))
    kept = Path(app.driver.preparer.prepare(ClaimRef("default", "c", UID), 10).cdi_spec or "")
    cdi = tmp_path / "cdi"
    ours = [
        cdi / spec_file_name(DRIVER, "dead-claim"),  # written, then killed before the record said so
        cdi / f".{spec_file_name(DRIVER, 'dead-claim')}.a1b2c3d4.tmp",  # killed mid-write
        tmp_path / "plugins" / DRIVER / f".{CHECKPOINT_NAME}.zz_9x8y7.tmp",
    ]
    theirs = [
        cdi / spec_file_name("other.example.com", "dead-claim"),  # another driver's spec
        cdi / "k8s.nvidia.com-device.json",  # the device plugin's spec
        cdi / ".k8s.nvidia.com-device.json.a1b2c3d4.tmp",  # another writer's temp file
        cdi / "notes.txt",
    ]
    for path in ours + theirs:
        path.write_text("{}")
    (cdi / spec_file_name(DRIVER, "a-directory")).mkdir()  # our pattern, but not something we write
    notes = build(tmp_path).driver.preparer.resume()
    assert [p for p in ours if p.exists()] == []
    assert all(p.exists() for p in theirs) and kept.exists(), "a completed claim keeps its spec"
    assert (cdi / spec_file_name(DRIVER, "a-directory")).is_dir()
    assert sum("unfinished preparation" in note for note in notes) == len(ours)
