"""The dynamic-MIG checkpoint: held placements in the one checkpoint envelope (gpuslice.fsutil.checkpoint)."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

from gpuslice.fsutil.atomic import leftover_temp_files
from gpuslice.fsutil.checkpoint import CORRUPT_SUFFIX as CORRUPT_SUFFIX  # where the plugin's callers know it
from gpuslice.fsutil.checkpoint import CheckpointFormat, CheckpointUnusable, digest, set_aside
from gpuslice.gpu import MigInstance
from gpuslice.sharing.dynamic import CHECKPOINT_FILE_NAME
from gpuslice.sharing.dynamic.geometry import Holding

KIND = "gpuslice/dynamic-mig-checkpoint"
VERSION = 2  # 1: node inside data, checksum over data only (read and upgraded)
FILE_NAME = CHECKPOINT_FILE_NAME
# A holding is ~400 bytes and a node has at most a few hundred placements: 4 MiB is ample, and bounded.
MAX_CHECKPOINT_BYTES = 4 << 20

_HOLDING_TYPES: dict[str, type | tuple[type, ...]] = {
    "slot_id": str,
    "gpu_uuid": str,
    "gpu_index": int,
    "profile": str,
    "start": int,
    "size": int,
    "since": (int, float),
    "seen": bool,
}
_MIG_FIELDS = {f.name: (str if f.type == "str" else int) for f in fields(MigInstance)}

# The envelope's own error: the runtime and the plugin catch it under the name they always used.
MigCheckpointError = CheckpointUnusable


def _upgrade_v1(document: dict[str, Any]) -> dict[str, Any]:
    """Version 1: `{kind, version, checksum, data: {node, holdings}}`, the checksum over data alone."""
    data = document.get("data")
    if not isinstance(data, dict):
        raise MigCheckpointError("data: missing or not an object")
    if document.get("checksum") != digest(data):
        raise MigCheckpointError(f"checksum mismatch: recorded {document.get('checksum')!r}, content {digest(data)}")
    node = data.get("node")
    if not isinstance(node, str):
        raise MigCheckpointError(f"data.node: {node!r} is not a node name")
    return MIG_CHECKPOINT_FORMAT.seal(node, {"holdings": data.get("holdings")}, version=2)


MIG_CHECKPOINT_FORMAT = CheckpointFormat(
    KIND, VERSION, "data", "dynamic MIG checkpoint", MAX_CHECKPOINT_BYTES, {1: _upgrade_v1}
)


def encode_holdings(holdings: Iterable[Holding], node_name: str) -> dict[str, Any]:
    """The sealed document for `holdings`: {kind, version, node, checksum, data: {holdings: [...]}}."""
    return MIG_CHECKPOINT_FORMAT.seal(node_name, _body(holdings))


def decode_holdings(document: Any, node_name: str | None = None) -> tuple[Holding, ...]:
    """Holdings from a document (any version read); MigCheckpointError naming the key when anything is off."""
    return _holdings(MIG_CHECKPOINT_FORMAT.open(document, node_name))


def write_checkpoint(path: Path, holdings: Iterable[Holding], node_name: str) -> None:
    """Write atomically, mode 0600 (gpuslice.fsutil.checkpoint)."""
    MIG_CHECKPOINT_FORMAT.write(path, node_name, _body(holdings))


def read_checkpoint(path: Path, node_name: str | None = None) -> tuple[Holding, ...] | None:
    """The recorded holdings, None when there is no file, MigCheckpointError when it cannot be trusted."""
    data = MIG_CHECKPOINT_FORMAT.read(path, node_name)
    return None if data is None else _holdings(data)


def claimed_gpus(path: Path, node_name: str) -> frozenset[str]:
    """UUIDs of the GPUs a trustworthy checkpoint holds placements on; empty when there is none."""
    try:
        holdings = read_checkpoint(path, node_name)
    except MigCheckpointError:
        return frozenset()  # resume reports it; here we only decide which GPUs are ours
    return frozenset(h.gpu_uuid for h in holdings or ())


class MigCheckpoint:
    """The checkpoint file of one plugin; `save` is serialised so the newest state always lands last."""

    def __init__(self, path: str | Path, node_name: str) -> None:
        self.path = Path(path)
        self.node_name = node_name
        self._lock = threading.Lock()

    def save(self, holdings: Iterable[Holding]) -> None:
        with self._lock:
            write_checkpoint(self.path, holdings, self.node_name)

    def load(self) -> tuple[Holding, ...] | None:
        """See read_checkpoint."""
        with self._lock:
            return read_checkpoint(self.path, self.node_name)

    def remove_leftovers(self) -> list[Path]:
        """Remove the temp files of writes a kill interrupted (`.<name>.<random>.tmp` beside the file)."""
        with self._lock:
            leftovers = leftover_temp_files(self.path)
            for path in leftovers:
                path.unlink(missing_ok=True)
            return leftovers

    def quarantine(self) -> Path | None:
        """Move an untrusted file aside (`<name>.corrupt`) for inspection; returns where it went."""
        with self._lock:
            return set_aside(self.path)


def _body(holdings: Iterable[Holding]) -> dict[str, Any]:
    return {"holdings": [_holding_dict(h) for h in sorted(holdings, key=lambda h: h.slot_id)]}


def _holdings(data: Any) -> tuple[Holding, ...]:
    entries = data.get("holdings") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise MigCheckpointError("data.holdings: missing or not a list")
    return tuple(_holding(entry, f"data.holdings[{i}]") for i, entry in enumerate(entries))


def _holding_dict(holding: Holding) -> dict[str, Any]:
    entry: dict[str, Any] = {key: getattr(holding, key) for key in _HOLDING_TYPES}
    entry["mig"] = None if holding.mig is None else {key: getattr(holding.mig, key) for key in _MIG_FIELDS}
    return entry


def _holding(entry: Any, where: str) -> Holding:
    if not isinstance(entry, dict):
        raise MigCheckpointError(f"{where}: not an object")
    values = {key: _typed(entry, key, kind, where) for key, kind in _HOLDING_TYPES.items()}
    mig_entry = entry.get("mig")
    mig = None
    if mig_entry is not None:
        if not isinstance(mig_entry, dict):
            raise MigCheckpointError(f"{where}.mig: not an object")
        mig = MigInstance(**{key: _typed(mig_entry, key, kind, f"{where}.mig") for key, kind in _MIG_FIELDS.items()})
    return Holding(mig=mig, **values)


def _typed(entry: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    value = entry.get(key)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise MigCheckpointError(f"{where}.{key}: missing or of the wrong type ({value!r})")
    return value
