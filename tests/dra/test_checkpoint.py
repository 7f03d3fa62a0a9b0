"""The prepared-claims checkpoint: checksummed, atomic, and set aside (never trusted) when damaged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuslice.dra.checkpoint import ClaimCheckpoint, ClaimRecord, CreatedMig, PreparedDevice

RECORD = ClaimRecord(
    uid="u-1",
    namespace="default",
    name="one",
    state="PrepareCompleted",
    devices=(PreparedDevice(("gpu",), "node-a", "gpu-3-mig-3g40gb-9-0", ("k8s.gpu.gpuslice.io/claim=u-1-gpu-3",)),),
    migs=(CreatedMig("gpu-3-mig-3g40gb-9-0", 3, "GPU-x", "3g.40gb", 0, 1, 0, "MIG-y", 417, 418),),
    env={"A": "b"},
    mounts=(("/tmp/nvidia-mps", "/host/pipe"),),
    isolation="strong isolation (MIG partition)",
)


def test_round_trip(tmp_path: Path) -> None:
    checkpoint = ClaimCheckpoint(tmp_path / "checkpoint.json", "node-a")
    checkpoint.save({"u-1": RECORD})
    assert checkpoint.load() == {"u-1": RECORD}


@pytest.mark.parametrize(
    "damage",
    [
        lambda text: text.replace('"gpu-3-mig-3g40gb-9-0"', '"gpu-0"', 1),  # edited: the checksum no longer matches
        lambda text: text[: len(text) // 2],  # cut short by a crash of something that did not write atomically
        lambda text: json.dumps({**json.loads(text), "node": "node-b"}),  # another node's file
        lambda text: "\xff\xfe",
    ],
)
def test_a_damaged_file_is_set_aside(tmp_path: Path, damage: object) -> None:
    path = tmp_path / "checkpoint.json"
    checkpoint = ClaimCheckpoint(path, "node-a")
    checkpoint.save({"u-1": RECORD})
    path.write_text(damage(path.read_text()))  # type: ignore[operator]
    assert checkpoint.load() == {}
    assert path.with_name("checkpoint.json.corrupt").exists() and not path.exists()


def test_a_missing_file_is_an_empty_checkpoint(tmp_path: Path) -> None:
    assert ClaimCheckpoint(tmp_path / "none.json", "node-a").load() == {}


def test_an_oversized_file_is_set_aside_unread(tmp_path: Path) -> None:
    from gpuslice.dra.checkpoint import MAX_BYTES

    path = tmp_path / "checkpoint.json"
    path.write_bytes(b" " * (MAX_BYTES + 1))
    assert ClaimCheckpoint(path, "node-a").load() == {}
    assert path.with_name("checkpoint.json.corrupt").exists()
