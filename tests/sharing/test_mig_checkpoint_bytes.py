"""A corrupt dynamic-MIG checkpoint (bad bytes, bad JSON, bad checksum, oversize) is set aside and rebuilt."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuslice.discovery import RecordingMigControl
from gpuslice.sharing.dynamic.checkpoint import (
    CORRUPT_SUFFIX,
    MAX_CHECKPOINT_BYTES,
    MigCheckpoint,
    MigCheckpointError,
    encode_holdings,
    read_checkpoint,
)
from gpuslice.sharing.dynamic.geometry import DynamicMigGeometry
from gpuslice.sharing.dynamic.plan import dynamic_resources
from gpuslice.sharing.dynamic.runtime import DynamicMig
from tests.support.hostile import CHECKPOINT_NODE as NODE
from tests.support.hostile import sample_holdings as held


def _tampered() -> bytes:
    document = encode_holdings(held(), NODE.name)
    document["data"]["holdings"][0]["start"] = 4
    return json.dumps(document).encode()


CORRUPT = [
    ("random-bytes", bytes(range(256)) * 8, "not UTF-8 text (byte 0x80 at offset 128)"),
    ("bad-utf8-in-json", b'{"kind": "\xff"}', "not UTF-8 text (byte 0xff at offset 10)"),
    ("bad-json", b'{"kind": ', "not valid JSON"),
    ("deep-nesting", b"[" * 100_000 + b"]" * 100_000, "not valid JSON"),
    ("bad-checksum", _tampered(), "checksum mismatch"),
    ("oversize", b" " * (MAX_CHECKPOINT_BYTES + 1), f"larger than the limit of {MAX_CHECKPOINT_BYTES} bytes"),
]


@pytest.mark.parametrize(("data", "message"), [c[1:] for c in CORRUPT], ids=[c[0] for c in CORRUPT])
def test_every_corrupt_form_is_a_checkpoint_error(tmp_path: Path, data: bytes, message: str) -> None:
    path = tmp_path / "ckpt"
    path.write_bytes(data)
    with pytest.raises(MigCheckpointError, match=message.replace("(", r"\(").replace(")", r"\)")):
        read_checkpoint(path, NODE.name)


@pytest.mark.parametrize("data", [c[1] for c in CORRUPT], ids=[c[0] for c in CORRUPT])
def test_resume_sets_a_corrupt_file_aside_and_writes_a_fresh_one(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "ckpt"
    path.write_bytes(data)
    dynamic = DynamicMig(
        DynamicMigGeometry(dynamic_resources(NODE)), RecordingMigControl(NODE), MigCheckpoint(path, NODE.name)
    )
    report = dynamic.resume(None)
    assert report.problem is not None and report.source != "checkpoint"
    assert (tmp_path / ("ckpt" + CORRUPT_SUFFIX)).read_bytes() == data, "kept for inspection"
    assert read_checkpoint(path, NODE.name) == (), "rebuilt: a fresh, trustworthy, empty checkpoint"
