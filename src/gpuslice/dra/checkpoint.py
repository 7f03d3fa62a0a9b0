"""Prepared claims on disk in the one checkpoint envelope (gpuslice.fsutil.checkpoint), replaced on every change."""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from gpuslice.fsutil.checkpoint import DIGEST_PREFIX, CheckpointFormat, CheckpointUnusable, digest
from gpuslice.fsutil.regular import read_regular_bytes
from gpuslice.fsutil.textread import InputFileError

log = logging.getLogger("gpuslice.dra")

CHECKPOINT_KIND = "GpusliceDraCheckpoint"
CHECKPOINT_VERSION = 2  # 1: the checksum a bare hex digest over claims alone (read and upgraded)
MAX_BYTES = 8 * 2**20  # a node prepares a few hundred claims at most; anything larger is not ours
MAX_CLAIMS = 4096

State = Literal["PrepareStarted", "PrepareCompleted"]


# The envelope's own error, under the name DRA callers and tests know.
CheckpointCorrupt = CheckpointUnusable


@dataclass(frozen=True)
class PreparedDevice:
    """One device handed to the kubelet for a claim."""

    requests: tuple[str, ...]
    pool: str
    device: str
    cdi_ids: tuple[str, ...]


@dataclass(frozen=True)
class CreatedMig:
    """A MIG device created for a dynamic placement: enough to find and destroy it again."""

    device: str
    gpu_index: int
    gpu_uuid: str
    profile: str
    start: int
    gi: int
    ci: int
    uuid: str
    gi_cap_minor: int  # /dev/nvidia-caps/nvidia-cap<minor> of the GI and of the CI, as the control reported them
    ci_cap_minor: int


@dataclass(frozen=True)
class ClaimRecord:
    """What was done for one claim; `PrepareStarted` means: undo these before trying again."""

    uid: str
    namespace: str
    name: str
    state: State
    devices: tuple[PreparedDevice, ...] = ()
    migs: tuple[CreatedMig, ...] = ()
    mps_daemon: str | None = None  # the daemon's directory
    timeslice_gpus: tuple[str, ...] = ()  # GPUs whose time-slice interval we set
    cdi_spec: str | None = None  # the transient CDI spec file
    isolation: str = ""
    env: dict[str, str] = field(default_factory=dict)  # the claim's CDI env, to rewrite its spec after a restart
    mounts: tuple[tuple[str, str], ...] = ()

    @property
    def device_names(self) -> tuple[str, ...]:
        return tuple(device.device for device in self.devices)


def _record_from(data: dict[str, Any]) -> ClaimRecord:
    return ClaimRecord(
        uid=str(data["uid"]),
        namespace=str(data["namespace"]),
        name=str(data["name"]),
        state=data["state"],
        devices=tuple(
            PreparedDevice(tuple(d["requests"]), d["pool"], d["device"], tuple(d["cdi_ids"])) for d in data["devices"]
        ),
        migs=tuple(CreatedMig(**m) for m in data["migs"]),
        mps_daemon=data.get("mps_daemon"),
        timeslice_gpus=tuple(data.get("timeslice_gpus", ())),
        cdi_spec=data.get("cdi_spec"),
        isolation=str(data.get("isolation", "")),
        env={str(key): str(value) for key, value in data.get("env", {}).items()},
        mounts=tuple((str(container), str(host)) for container, host in data.get("mounts", ())),
    )


def _upgrade_v1(document: dict[str, Any]) -> dict[str, Any]:
    """Version 1: the same keys, its checksum the bare hex SHA-256 of the canonical claims (node not covered)."""
    claims, node = document.get("claims"), document.get("node")
    if document.get("checksum") != digest(claims).removeprefix(DIGEST_PREFIX):
        raise CheckpointCorrupt("checksum mismatch")
    if not isinstance(node, str):
        raise CheckpointCorrupt(f"node: {node!r} is not a node name")
    return FORMAT.seal(node, claims, version=2)


FORMAT = CheckpointFormat(CHECKPOINT_KIND, CHECKPOINT_VERSION, "claims", "DRA checkpoint", MAX_BYTES, {1: _upgrade_v1})


def encode_claims(node: str, records: dict[str, ClaimRecord]) -> str:
    """The checkpoint text for `records` (the file's content)."""
    return json.dumps(FORMAT.seal(node, _claims_body(records)), indent=1, sort_keys=True) + "\n"


def decode_claims(text: str, node: str) -> dict[str, ClaimRecord]:
    """The records of a checkpoint text (any version read); CheckpointCorrupt says why it is not trusted."""
    return _records(FORMAT.parse(text.encode(), node))


def _claims_body(records: dict[str, ClaimRecord]) -> dict[str, Any]:
    return {uid: asdict(record) for uid, record in sorted(records.items())}


def _records(claims: Any) -> dict[str, ClaimRecord]:
    if not isinstance(claims, dict) or len(claims) > MAX_CLAIMS:
        raise CheckpointCorrupt(f"claims must be a map of at most {MAX_CLAIMS} entries")
    try:
        return {uid: _record_from(data) for uid, data in claims.items()}
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CheckpointCorrupt(f"bad claim record: {exc!r}") from exc


class ClaimCheckpoint:
    """The checkpoint file of one plugin; `load` never trusts a bad file (it is set aside and reported)."""

    def __init__(self, path: str | Path, node: str) -> None:
        self.path = Path(path)
        self.node = node

    def load(self) -> dict[str, ClaimRecord]:
        return FORMAT.load(self.path, self.node, log, _records) or {}

    def save(self, records: dict[str, ClaimRecord]) -> None:
        FORMAT.write(self.path, self.node, _claims_body(records))


def gpus_with_prepared_migs(path: Path) -> tuple[str, ...]:
    """GPUs a checkpoint holds MIG devices on, read leniently (bounded and non-blocking; a bad file is judged
    again at start, when it is set aside)."""
    try:
        claims = json.loads(read_regular_bytes(path, "DRA checkpoint", MAX_BYTES)).get("claims", {})
        return tuple({str(m.get("gpu_uuid", "")) for c in claims.values() for m in c.get("migs", []) if m})
    except (OSError, InputFileError, ValueError, RecursionError, AttributeError, TypeError):
        return ()
