"""Prepared claims on disk in the one checkpoint envelope (gpuslice.fsutil.checkpoint), replaced on every change."""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, field, fields
from pathlib import Path
from typing import Any, Literal

from gpuslice import records
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


@records.record
class PreparedDevice:
    """One device handed to the kubelet for a claim."""

    requests: tuple[str, ...]
    pool: str
    device: str
    cdi_ids: tuple[str, ...]


@records.record
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


@records.record
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


_STATES = ("PrepareStarted", "PrepareCompleted")
_MIG_FIELDS = {f.name: (int if f.type == "int" else str) for f in fields(CreatedMig)}


def _record_from(data: Any, where: str) -> ClaimRecord:
    """A record from its JSON, every field of its type: a value from the file later names device nodes and
    paths, so a number that is a string (`"1/../../x"`) is refused here, not trusted downstream."""
    if not isinstance(data, dict):
        raise CheckpointCorrupt(f"{where}: not an object")
    state = data.get("state")
    if state not in _STATES:
        raise CheckpointCorrupt(f"{where}.state: {str(state)[:64]!r} is not one of {', '.join(_STATES)}")
    return ClaimRecord(
        uid=_typed(data, "uid", str, where),
        namespace=_typed(data, "namespace", str, where),
        name=_typed(data, "name", str, where),
        state=state,
        devices=tuple(
            _device(entry, f"{where}.devices[{i}]") for i, entry in enumerate(_list(data, "devices", where, []))
        ),
        migs=tuple(_mig(entry, f"{where}.migs[{i}]") for i, entry in enumerate(_list(data, "migs", where, []))),
        mps_daemon=_optional(data, "mps_daemon", where),
        timeslice_gpus=_strings(data.get("timeslice_gpus", []), f"{where}.timeslice_gpus"),
        cdi_spec=_optional(data, "cdi_spec", where),
        isolation=_typed({"isolation": data.get("isolation", "")}, "isolation", str, where),
        env=_env(data.get("env", {}), f"{where}.env"),
        mounts=tuple(_pair(entry, f"{where}.mounts[{i}]") for i, entry in enumerate(_list(data, "mounts", where, []))),
    )


def _typed(data: dict[str, Any], key: str, kind: type, where: str) -> Any:
    value = data.get(key)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise CheckpointCorrupt(f"{where}.{key}: missing or not a {kind.__name__} ({str(value)[:64]!r})")
    return value


def _list(data: dict[str, Any], key: str, where: str, default: list[Any]) -> list[Any]:
    value: list[Any] = _typed({key: data.get(key, default)}, key, list, where)
    return value


def _optional(data: dict[str, Any], key: str, where: str) -> str | None:
    return None if data.get(key) is None else str(_typed(data, key, str, where))


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise CheckpointCorrupt(f"{where}: not a list of strings")
    return tuple(value)


def _env(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(item, str) for item in value.values()):
        raise CheckpointCorrupt(f"{where}: not a map of strings")
    return dict(value)


def _pair(value: Any, where: str) -> tuple[str, str]:
    pair = _strings(value, where)
    if len(pair) != 2:
        raise CheckpointCorrupt(f"{where}: not a (container path, host path) pair")
    return pair[0], pair[1]


def _device(entry: Any, where: str) -> PreparedDevice:
    if not isinstance(entry, dict):
        raise CheckpointCorrupt(f"{where}: not an object")
    requests = _strings(entry.get("requests"), f"{where}.requests")
    pool, device = _typed(entry, "pool", str, where), _typed(entry, "device", str, where)
    return PreparedDevice(requests, pool, device, _strings(entry.get("cdi_ids"), f"{where}.cdi_ids"))


def _mig(entry: Any, where: str) -> CreatedMig:
    if not isinstance(entry, dict) or set(entry) != set(_MIG_FIELDS):
        raise CheckpointCorrupt(f"{where}: not an object with exactly {', '.join(_MIG_FIELDS)}")
    return CreatedMig(**{key: _typed(entry, key, kind, where) for key, kind in _MIG_FIELDS.items()})


def _upgrade_v1(document: dict[str, Any]) -> dict[str, Any]:
    """Version 1: the same keys, its checksum the bare hex SHA-256 of the canonical claims (node not covered)."""
    claims, node = document.get("claims"), document.get("node")
    if document.get("checksum") != digest(claims).removeprefix(DIGEST_PREFIX):
        raise CheckpointCorrupt("checksum mismatch")
    if not isinstance(node, str):
        raise CheckpointCorrupt(f"node: {node!r} is not a node name")
    return CLAIM_CHECKPOINT_FORMAT.seal(node, claims, version=2)


CLAIM_CHECKPOINT_FORMAT = CheckpointFormat(
    CHECKPOINT_KIND, CHECKPOINT_VERSION, "claims", "DRA checkpoint", MAX_BYTES, {1: _upgrade_v1}
)


def encode_claims(node: str, records: dict[str, ClaimRecord]) -> str:
    """The checkpoint text for `records` (the file's content)."""
    return json.dumps(CLAIM_CHECKPOINT_FORMAT.seal(node, _claims_body(records)), sort_keys=True) + "\n"


def decode_claims(text: str, node: str) -> dict[str, ClaimRecord]:
    """The records of a checkpoint text (any version read); CheckpointCorrupt says why it is not trusted."""
    return _records(CLAIM_CHECKPOINT_FORMAT.parse(text.encode(), node))


def _claims_body(records: dict[str, ClaimRecord]) -> dict[str, Any]:
    return {uid: asdict(record) for uid, record in sorted(records.items())}


def _records(claims: Any) -> dict[str, ClaimRecord]:
    if not isinstance(claims, dict) or len(claims) > MAX_CLAIMS:
        raise CheckpointCorrupt(f"claims must be a map of at most {MAX_CLAIMS} entries")
    return {uid: _record_from(data, f"claims[{uid[:64]!r}]") for uid, data in claims.items()}


class ClaimCheckpoint:
    """The checkpoint file of one plugin; `load` never trusts a bad file (it is set aside and reported)."""

    def __init__(self, path: str | Path, node: str) -> None:
        self.path = Path(path)
        self.node = node
        self._bodies: dict[str, tuple[ClaimRecord, dict[str, Any]]] = {}  # uid -> (record, its JSON form)

    def load(self) -> dict[str, ClaimRecord]:
        return CLAIM_CHECKPOINT_FORMAT.load(self.path, self.node, log, _records) or {}

    def save(self, records: dict[str, ClaimRecord]) -> None:
        CLAIM_CHECKPOINT_FORMAT.write(self.path, self.node, self._body(records))

    def _body(self, records: dict[str, ClaimRecord]) -> dict[str, Any]:
        """_claims_body(records), each record's JSON form made once: a record is frozen (a change is a new
        record), and every prepare saves all the node's claims, of which all but one are as they were."""
        bodies = {}
        for uid, record in sorted(records.items()):
            known = self._bodies.get(uid)
            bodies[uid] = known if known is not None and known[0] is record else (record, asdict(record))
        self._bodies = bodies
        return {uid: body for uid, (_, body) in bodies.items()}


def gpus_with_prepared_migs(path: Path) -> tuple[str, ...]:
    """GPUs a checkpoint holds MIG devices on, read leniently (bounded and non-blocking; a bad file is judged
    again at start, when it is set aside)."""
    try:
        claims = json.loads(read_regular_bytes(path, "DRA checkpoint", MAX_BYTES)).get("claims", {})
        return tuple({str(m.get("gpu_uuid", "")) for c in claims.values() for m in c.get("migs", []) if m})
    except (OSError, InputFileError, ValueError, RecursionError, AttributeError, TypeError):
        return ()
