"""The prepared-claims checkpoint: checksummed, atomic, and set aside (never trusted) when damaged."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from pathlib import Path

import pytest

from gpuslice.dra.checkpoint import CHECKPOINT_VERSION, ClaimCheckpoint, ClaimRecord, CreatedMig, PreparedDevice

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


def _version_1(claims: dict[str, object]) -> dict[str, object]:
    """The previous release's layout: the checksum the bare SHA-256 hex of the canonical claims."""
    canonical = json.dumps(claims, sort_keys=True, separators=(",", ":")).encode()
    checksum = hashlib.sha256(canonical).hexdigest()
    return {"kind": "GpusliceDraCheckpoint", "version": 1, "node": "node-a", "checksum": checksum, "claims": claims}


def test_a_version_1_file_is_read_and_upgraded_on_the_next_save(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    path.write_text(json.dumps(_version_1({"u-1": asdict(RECORD)}), indent=1, sort_keys=True) + "\n")
    checkpoint = ClaimCheckpoint(path, "node-a")
    assert checkpoint.load() == {"u-1": RECORD}
    checkpoint.save(checkpoint.load())
    document = json.loads(path.read_text())
    assert document["version"] == CHECKPOINT_VERSION == 2 and document["checksum"].startswith("sha256:")
    assert checkpoint.load() == {"u-1": RECORD}


@pytest.mark.parametrize(
    "document",
    [
        {**_version_1({"u-1": asdict(RECORD)}), "checksum": "0" * 64},  # a version 1 file whose checksum is off
        {**_version_1({"u-1": asdict(RECORD)}), "node": "node-b"},  # a version 1 file of another node
        {**_version_1({"u-1": asdict(RECORD)}), "version": 3},  # a version this plugin does not know
    ],
    ids=["v1-checksum", "v1-other-node", "future-version"],
)
def test_untrusted_older_or_newer_files_are_set_aside(tmp_path: Path, document: dict[str, object]) -> None:
    path = tmp_path / "checkpoint.json"
    path.write_text(json.dumps(document))
    assert ClaimCheckpoint(path, "node-a").load() == {}
    assert path.with_name("checkpoint.json.corrupt").exists() and not path.exists()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"migs": [{**asdict(RECORD.migs[0]), "gi_cap_minor": "1/../../../etc/shadow"}]}, "gi_cap_minor"),
        ({"migs": [{**asdict(RECORD.migs[0]), "extra": 1}]}, "exactly"),
        ({"state": "Prepared"}, "state"),
        ({"mounts": [["/a"]]}, "pair"),
        ({"env": {"A": 1}}, "map of strings"),
        ({"cdi_spec": 7}, "cdi_spec"),
    ],
    ids=["string-cap-minor", "unknown-mig-key", "unknown-state", "half-a-mount", "number-in-env", "number-path"],
)
def test_a_sealed_record_of_the_wrong_types_is_refused(tmp_path: Path, change: dict[str, object], message: str) -> None:
    from gpuslice.dra.checkpoint import CLAIM_CHECKPOINT_FORMAT, CheckpointCorrupt, decode_claims

    text = json.dumps(CLAIM_CHECKPOINT_FORMAT.seal("node-a", {"u-1": {**asdict(RECORD), **change}}))
    with pytest.raises(CheckpointCorrupt, match=message):
        decode_claims(text, "node-a")
