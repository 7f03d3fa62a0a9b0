"""The dynamic-MIG checkpoint: round trip, atomic replace, and every way a file is refused instead of trusted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuslice.discovery import RecordingMigControl, parse_node_spec
from gpuslice.fsutil.checkpoint import digest
from gpuslice.gpu.mig import H100_80GB
from gpuslice.sharing.dynamic.checkpoint import (
    CORRUPT_SUFFIX,
    KIND,
    MIG_CHECKPOINT_FORMAT,
    VERSION,
    MigCheckpoint,
    MigCheckpointError,
    claimed_gpus,
    decode_holdings,
    encode_holdings,
    read_checkpoint,
)
from gpuslice.sharing.dynamic.geometry import DynamicMigGeometry, Holding, slot_id
from gpuslice.sharing.dynamic.plan import dynamic_resources

NODE = parse_node_spec(
    {
        "name": "ckpt",
        "gpus": [{"model": "NVIDIA H100 80GB HBM3", "memory_mib": 81559, "compute_capability": "9.0", "mig": []}],
    }
).node


def held() -> tuple[Holding, ...]:
    """Two holdings as a plugin would have them: one with its created MIG device, one reserved only."""
    geometry = DynamicMigGeometry(dynamic_resources(NODE), clock=lambda: 1700000000.5)
    gpu = NODE.gpus[0]
    three = geometry.reserve([slot_id(gpu.uuid, H100_80GB.profile("3g.40gb"), 0)])[0]
    geometry.reserve([slot_id(gpu.uuid, H100_80GB.profile("1g.10gb"), 6)])
    geometry.attach(three.id, RecordingMigControl(NODE).create(0, "3g.40gb", 0))
    geometry.mark_seen([three.id])
    return geometry.holdings()


def test_round_trip_keeps_every_field(tmp_path: Path) -> None:
    store = MigCheckpoint(tmp_path / "ckpt", NODE.name)
    assert store.load() is None  # no file: a first start
    holdings = held()
    store.save(holdings)
    assert sorted(store.load() or (), key=lambda h: h.slot_id) == sorted(holdings, key=lambda h: h.slot_id)
    document = json.loads((tmp_path / "ckpt").read_text())
    assert document["kind"] == KIND and document["version"] == VERSION
    assert document["node"] == NODE.name and set(document["data"]) == {"holdings"}
    assert document["checksum"] == digest({k: document[k] for k in ("kind", "version", "node", "data")})
    assert document["checksum"].startswith("sha256:") and len(document["checksum"]) == 7 + 64


def test_write_replaces_atomically_and_leaves_no_temp_files(tmp_path: Path) -> None:
    store = MigCheckpoint(tmp_path / "ckpt", NODE.name)
    store.save(held())
    store.save(())
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt"]
    assert store.load() == ()


def _version_1() -> dict[str, Any]:
    """Today's (version 1) layout, byte for byte as the previous release wrote it."""
    body = encode_holdings(held(), NODE.name)["data"]
    data = {"node": NODE.name, "holdings": body["holdings"]}
    return {"kind": KIND, "version": 1, "checksum": digest(data), "data": data}


def _mutations() -> list[tuple[str, Any, str]]:
    good = encode_holdings(held(), NODE.name)

    def changed(**top: Any) -> dict[str, Any]:
        return {**good, **top}

    tampered = json.loads(json.dumps(good))
    tampered["data"]["holdings"][0]["start"] = 4  # content changed, checksum not
    resealed = json.loads(json.dumps(tampered))
    resealed["data"]["holdings"][0]["gpu_index"] = "zero"
    resealed = MIG_CHECKPOINT_FORMAT.seal(NODE.name, resealed["data"])
    other_node = MIG_CHECKPOINT_FORMAT.seal("elsewhere", good["data"])
    return [
        ("truncated", json.dumps(good)[:40], "not valid JSON"),
        ("not an object", "[1, 2]", "not a JSON object"),
        ("wrong kind", json.dumps(changed(kind="something")), "kind is 'something'"),
        ("future version", json.dumps(changed(version=VERSION + 1)), f"unknown version {VERSION + 1}"),
        ("boolean version", json.dumps(changed(version=True)), "unknown version True"),
        ("no version", json.dumps({k: v for k, v in good.items() if k != "version"}), "unknown version None"),
        ("checksum mismatch", json.dumps(tampered), "checksum mismatch"),
        ("bad field type", json.dumps(resealed), r"data.holdings\[0\].gpu_index: missing or of the wrong type"),
        ("another node's file", json.dumps(other_node), "written by node 'elsewhere'"),
        ("version 1 tampered", json.dumps({**_version_1(), "checksum": "sha256:" + "0" * 64}), "checksum mismatch"),
        ("version 1 without data", json.dumps({"kind": KIND, "version": 1, "checksum": ""}), "data: missing"),
    ]


@pytest.mark.parametrize(("case", "text", "message"), _mutations(), ids=[m[0] for m in _mutations()])
def test_untrusted_files_are_refused_with_the_reason(tmp_path: Path, case: str, text: str, message: str) -> None:
    path = tmp_path / "ckpt"
    path.write_text(text)
    with pytest.raises(MigCheckpointError, match=message):
        read_checkpoint(path, NODE.name)


def test_decode_without_node_check_and_quarantine(tmp_path: Path) -> None:
    document = encode_holdings(held(), "any")
    assert len(decode_holdings(document)) == 2
    store = MigCheckpoint(tmp_path / "ckpt", NODE.name)
    assert store.quarantine() is None
    (tmp_path / "ckpt").write_text("garbage")
    moved = store.quarantine()
    assert moved == tmp_path / ("ckpt" + CORRUPT_SUFFIX) and moved.read_text() == "garbage"
    assert store.load() is None


def test_claimed_gpus_only_from_a_trusted_file(tmp_path: Path) -> None:
    path = tmp_path / "ckpt"
    assert claimed_gpus(path, NODE.name) == frozenset()
    MigCheckpoint(path, NODE.name).save(held())
    assert claimed_gpus(path, NODE.name) == {NODE.gpus[0].uuid}
    path.write_text(path.read_text().replace('"start": 0', '"start": 4'))
    assert claimed_gpus(path, NODE.name) == frozenset()


def test_a_version_1_file_is_read_and_rewritten_as_the_current_version(tmp_path: Path) -> None:
    path = tmp_path / "ckpt"
    path.write_text(json.dumps(_version_1(), indent=1, sort_keys=True))
    store = MigCheckpoint(path, NODE.name)
    restored = store.load()
    assert sorted(restored or (), key=lambda h: h.slot_id) == sorted(held(), key=lambda h: h.slot_id)
    store.save(restored or ())
    assert json.loads(path.read_text())["version"] == VERSION
    assert store.load() == restored
    with pytest.raises(MigCheckpointError, match="written by node 'ckpt'"):
        read_checkpoint(path, "another")


def test_resume_removes_temp_files_of_killed_writes_only(tmp_path: Path) -> None:
    from gpuslice.sharing.dynamic.runtime import DynamicMig

    store = MigCheckpoint(tmp_path / "ckpt", NODE.name)
    store.save(held())
    killed = tmp_path / ".ckpt.k1ll3d_x.tmp"
    other = tmp_path / ".other.k1ll3d_x.tmp"
    killed.write_text("{")
    other.write_text("{")
    dynamic = DynamicMig(DynamicMigGeometry(dynamic_resources(NODE)), RecordingMigControl(NODE), store)
    assert dynamic.resume(None).source == "checkpoint"
    assert not killed.exists() and other.exists()
