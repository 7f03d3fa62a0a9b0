"""The dynamic-MIG checkpoint: held placements on disk, written atomically, versioned and checksummed."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Iterable, Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

from gpuslice.fsutil.atomic import atomic_write_text
from gpuslice.fsutil.textread import InputFileError, read_bounded_text
from gpuslice.gpu import MigInstance
from gpuslice.sharing.dynamic.geometry import Holding

KIND = "gpuslice/dynamic-mig-checkpoint"
VERSION = 1
FILE_NAME = "gpuslice_dynamic_mig_checkpoint"  # beside the plugin sockets: the kubelet's wipe keeps regular files
CORRUPT_SUFFIX = ".corrupt"
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


class MigCheckpointError(ValueError):
    """A checkpoint that must not be trusted (unreadable, corrupt, unknown version, wrong checksum)."""


def checksum(data: Mapping[str, Any]) -> str:
    """sha256 of the canonical JSON of `data` (sorted keys, no spaces), as 'sha256:<hex>'."""
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def encode(holdings: Iterable[Holding], node_name: str) -> dict[str, Any]:
    """The document for `holdings`: {kind, version, checksum, data: {node, holdings: [...]}}."""
    data = {"node": node_name, "holdings": [_holding_dict(h) for h in sorted(holdings, key=lambda h: h.slot_id)]}
    return {"kind": KIND, "version": VERSION, "checksum": checksum(data), "data": data}


def decode(document: Any, node_name: str | None = None) -> tuple[Holding, ...]:
    """Holdings from a document; MigCheckpointError naming the key when anything is off."""
    if not isinstance(document, dict):
        raise MigCheckpointError("not a JSON object")
    if document.get("kind") != KIND:
        raise MigCheckpointError(f"kind is {document.get('kind')!r}, expected {KIND!r}")
    if document.get("version") != VERSION:
        raise MigCheckpointError(f"unknown version {document.get('version')!r} (this plugin reads version {VERSION})")
    data = document.get("data")
    if not isinstance(data, dict):
        raise MigCheckpointError("data: missing or not an object")
    if document.get("checksum") != checksum(data):
        raise MigCheckpointError(f"checksum mismatch: recorded {document.get('checksum')!r}, content {checksum(data)}")
    if node_name is not None and data.get("node") != node_name:
        raise MigCheckpointError(f"data.node: written by node {data.get('node')!r}, this is {node_name!r}")
    entries = data.get("holdings")
    if not isinstance(entries, list):
        raise MigCheckpointError("data.holdings: missing or not a list")
    return tuple(_holding(entry, f"data.holdings[{i}]") for i, entry in enumerate(entries))


def write_checkpoint(path: Path, document: Mapping[str, Any]) -> None:
    """Write atomically (gpuslice.fsutil), mode 0600: the checkpoint is the plugin's own state, not for others."""
    atomic_write_text(path, json.dumps(document, indent=1, sort_keys=True), mode=0o600)


def read_checkpoint(path: Path, node_name: str | None = None) -> tuple[Holding, ...] | None:
    """The recorded holdings, None when there is no file, MigCheckpointError when it cannot be trusted."""
    try:
        text = read_bounded_text(path, "dynamic MIG checkpoint", MAX_CHECKPOINT_BYTES)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise MigCheckpointError(f"cannot read: {exc.strerror or exc}") from exc
    except InputFileError as exc:  # random bytes or a runaway file: as untrustworthy as bad JSON
        raise MigCheckpointError(str(exc)) from exc
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as exc:  # RecursionError: thousands of nested brackets
        raise MigCheckpointError(f"not valid JSON: {exc}") from exc
    return decode(document, node_name)


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
            write_checkpoint(self.path, encode(holdings, self.node_name))

    def load(self) -> tuple[Holding, ...] | None:
        """See read_checkpoint."""
        with self._lock:
            return read_checkpoint(self.path, self.node_name)

    def quarantine(self) -> Path | None:
        """Move an untrusted file aside (`<name>.corrupt`) for inspection; returns where it went."""
        with self._lock:
            target = self.path.with_name(self.path.name + CORRUPT_SUFFIX)
            try:
                os.replace(self.path, target)
            except FileNotFoundError:
                return None
            return target


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
