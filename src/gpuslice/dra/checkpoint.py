"""Prepared claims on disk: one JSON document with a SHA-256 checksum, replaced atomically on every change."""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from gpuslice.fsutil.atomic import atomic_write_text
from gpuslice.fsutil.textread import InputFileError, read_bounded_text

log = logging.getLogger("gpuslice.dra")

CHECKPOINT_KIND = "GpusliceDraCheckpoint"
CHECKPOINT_VERSION = 1
MAX_BYTES = 8 * 2**20  # a node prepares a few hundred claims at most; anything larger is not ours
MAX_CLAIMS = 4096

State = Literal["PrepareStarted", "PrepareCompleted"]


class CheckpointCorrupt(ValueError):
    """A checkpoint that is not ours, does not parse, or whose checksum does not match."""


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


def _digest(claims: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(claims, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def encode(node: str, records: dict[str, ClaimRecord]) -> str:
    claims = {uid: asdict(record) for uid, record in sorted(records.items())}
    document = {
        "kind": CHECKPOINT_KIND,
        "version": CHECKPOINT_VERSION,
        "node": node,
        "checksum": _digest(claims),
        "claims": claims,
    }
    return json.dumps(document, indent=1, sort_keys=True) + "\n"


def decode(text: str, node: str) -> dict[str, ClaimRecord]:
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as exc:  # nesting deep enough to exhaust the parser is corrupt too
        raise CheckpointCorrupt(f"not JSON: {exc}") from exc
    if (
        not isinstance(document, dict)
        or document.get("kind") != CHECKPOINT_KIND
        or document.get("version") != CHECKPOINT_VERSION
    ):
        raise CheckpointCorrupt(f"not a {CHECKPOINT_KIND} version {CHECKPOINT_VERSION}")
    if document.get("node") != node:
        raise CheckpointCorrupt(f"written for node {document.get('node')!r}, this is {node!r}")
    claims = document.get("claims")
    if not isinstance(claims, dict) or len(claims) > MAX_CLAIMS:
        raise CheckpointCorrupt(f"claims must be a map of at most {MAX_CLAIMS} entries")
    if document.get("checksum") != _digest(claims):
        raise CheckpointCorrupt("checksum mismatch")
    try:
        return {uid: _record_from(data) for uid, data in claims.items()}
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointCorrupt(f"bad claim record: {exc}") from exc


class ClaimCheckpoint:
    """The checkpoint file of one plugin; `load` never trusts a bad file (it is set aside and reported)."""

    def __init__(self, path: str | Path, node: str) -> None:
        self.path = Path(path)
        self.node = node

    def load(self) -> dict[str, ClaimRecord]:
        try:
            return decode(read_bounded_text(self.path, "DRA checkpoint", MAX_BYTES), self.node)
        except FileNotFoundError:
            return {}
        except (CheckpointCorrupt, InputFileError) as exc:
            aside = self.path.with_name(self.path.name + ".corrupt")
            self.path.replace(aside)
            log.error("DRA checkpoint %s is unusable (%s); moved to %s, starting with no prepared claims",
                      self.path, exc, aside)  # fmt: skip
            return {}

    def save(self, records: dict[str, ClaimRecord]) -> None:
        atomic_write_text(self.path, encode(self.node, records), mode=0o600)


def claimed_gpus(path: Path) -> tuple[str, ...]:
    """GPUs a checkpoint holds MIG devices on, read leniently (bounded; a bad file is judged again at start)."""
    try:
        claims = json.loads(read_bounded_text(path, "DRA checkpoint", MAX_BYTES)).get("claims", {})
        return tuple({str(m.get("gpu_uuid", "")) for c in claims.values() for m in c.get("migs", []) if m})
    except (OSError, InputFileError, ValueError, RecursionError, AttributeError, TypeError):
        return ()
