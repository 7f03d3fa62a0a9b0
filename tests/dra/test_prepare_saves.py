"""When prepare writes its checkpoint: each hardware step's record before the next step, the spec and the
completion in one save after the spec is on disk; a kill before that save leaves nothing a start cannot undo."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gpuslice.dra import InMemoryResourceApi
from gpuslice.dra.app import DraApp
from gpuslice.dra.cdi import claim_spec_path
from gpuslice.dra.checkpoint import ClaimRecord
from gpuslice.dra.claims import ClaimRef
from gpuslice.mps import FakeMpsControl
from tests.dra.support import DRIVER, NODE, gpu_config, in_process_app

UID = "5f0c1c4e-aaaa-bbbb-cccc-ddddeeeeffff"
REF = ClaimRef("default", "c", UID)
MPS = gpu_config({"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 20}})


@dataclass(frozen=True)
class Saved:
    record: ClaimRecord | None  # the claim's record in that save
    spec_on_disk: bool  # whether the claim's spec file existed when it was saved


def build(root: Path) -> DraApp:
    config = f"version: v1\nflags:\n  migStrategy: dynamic\n  mpsRoot: {root / 'mps'}\n"
    return in_process_app(root, config, mps_control=FakeMpsControl())


def put_claim(app: DraApp, device: str, configs: list[Any]) -> None:
    results = [{"request": "gpu", "driver": DRIVER, "pool": NODE, "device": device}]
    api = app.api
    assert isinstance(api, InMemoryResourceApi)
    api.put_claim(
        {
            "metadata": {"name": REF.name, "namespace": REF.namespace, "uid": UID},
            "status": {"allocation": {"devices": {"results": results, "config": configs}}},
        }
    )


def record_saves(app: DraApp, root: Path, monkeypatch: pytest.MonkeyPatch) -> list[Saved]:
    checkpoint = app.driver.preparer.checkpoint
    real = checkpoint.save
    saves: list[Saved] = []

    def save(records: dict[str, ClaimRecord]) -> None:
        saves.append(Saved(records.get(UID), claim_spec_path(root / "cdi", DRIVER, UID).exists()))
        real(records)

    monkeypatch.setattr(checkpoint, "save", save)
    return saves


def test_a_whole_gpu_is_saved_once_completed_after_its_spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = build(tmp_path)
    put_claim(app, "gpu-1", [])
    saves = record_saves(app, tmp_path, monkeypatch)
    app.driver.preparer.prepare(REF, 10)
    assert len(saves) == 1
    assert saves[0].record is not None and saves[0].record.state == "PrepareCompleted"
    assert saves[0].spec_on_disk and saves[0].record.cdi_spec == str(claim_spec_path(tmp_path / "cdi", DRIVER, UID))
    app.driver.preparer.unprepare(REF, 10)
    assert len(saves) == 2 and saves[1].record is None and not saves[1].spec_on_disk, "unprepared in one save"


def test_an_mps_claim_records_its_daemon_before_it_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = build(tmp_path)
    put_claim(app, "gpu-0", [{"requests": ["gpu"], "opaque": {"driver": DRIVER, "parameters": MPS}}])
    saves = record_saves(app, tmp_path, monkeypatch)
    app.driver.preparer.prepare(REF, 10)
    first, last = saves[0].record, saves[-1].record
    assert first is not None and first.state == "PrepareStarted" and first.mps_daemon and not saves[0].spec_on_disk
    assert last is not None and last.state == "PrepareCompleted" and saves[-1].spec_on_disk
    assert len(saves) == 2


def test_a_kill_before_the_save_leaves_a_spec_the_next_start_removes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = build(tmp_path)
    put_claim(app, "gpu-1", [])

    def killed(records: dict[str, ClaimRecord]) -> None:
        raise SystemExit("killed")  # no rollback runs, as none would after a SIGKILL

    monkeypatch.setattr(app.driver.preparer.checkpoint, "save", killed)
    with pytest.raises(SystemExit):
        app.driver.preparer.prepare(REF, 10)
    spec = claim_spec_path(tmp_path / "cdi", DRIVER, UID)
    assert spec.exists()
    again = build(tmp_path)
    notes = again.driver.preparer.resume()
    assert not spec.exists() and any("unfinished preparation" in note for note in notes)
    assert again.driver.preparer.records() == {}
    put_claim(again, "gpu-1", [])
    assert again.driver.preparer.prepare(REF, 10).state == "PrepareCompleted" and spec.exists()


def test_a_start_with_nothing_to_undo_leaves_the_checkpoint_as_it_was(tmp_path: Path) -> None:
    app = build(tmp_path)
    put_claim(app, "gpu-1", [])
    app.driver.preparer.prepare(REF, 10)
    checkpoint = app.driver.preparer.checkpoint.path
    before = checkpoint.stat()
    again = build(tmp_path)  # the next start, over the same directories
    again.driver.preparer.resume()
    after = checkpoint.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)  # not rewritten
    assert UID in again.driver.preparer.records()


def test_a_start_that_rolls_a_claim_back_saves_without_it(tmp_path: Path) -> None:
    app = build(tmp_path)
    put_claim(app, "gpu-0", [{"requests": ["gpu"], "opaque": {"driver": DRIVER, "parameters": MPS}}])
    preparer = app.driver.preparer
    started = ClaimRecord(uid=UID, namespace=REF.namespace, name=REF.name, state="PrepareStarted")
    preparer.checkpoint.save({UID: started})  # a kill mid-prepare, as the file shows it
    again = build(tmp_path)
    assert UID in again.driver.preparer.records()
    again.driver.preparer.resume()
    assert UID not in again.driver.preparer.checkpoint.load()
