"""What a checkpoint record may name: only the paths and edits this plugin itself makes for the claim."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from gpuslice import records
from gpuslice.dra.cdi import cdi_id, claim_spec_path
from gpuslice.dra.checkpoint import ClaimRecord
from gpuslice.dra.claims import ClaimPrepareError, ClaimRef
from gpuslice.dra.mps import claim_mps_edits, daemon_dir

log = logging.getLogger("gpuslice.dra")


@records.record
class OwnPaths:
    """Where this plugin puts a claim's things: `<cdi dir>/<spec name of the claim>`, `<mpsRoot>/<claim uid>`."""

    driver: str
    cdi_dir: Path
    mps_root: Path | None

    def spec(self, uid: str) -> str:
        return str(claim_spec_path(self.cdi_dir, self.driver, uid))

    def daemon(self, uid: str) -> str | None:
        return None if self.mps_root is None else str(daemon_dir(self.mps_root, uid))


def confine(records: Mapping[str, ClaimRecord], own: OwnPaths) -> dict[str, ClaimRecord]:
    """The records as this plugin could have written them; anything else is refused and logged.

    The checksum proves only that the file is whole, not who wrote it (anyone can compute a SHA-256), so
    a record is never a list of paths to delete or mount. A record whose key, UID, namespace or name is
    not a valid claim reference is dropped. A spec path, daemon directory, env, mount or CDI ID that
    differs from the one derived from the claim's UID is replaced by the derived one (or dropped when
    there is none); the foreign path is left alone.
    """
    kept = {}
    for key, record in records.items():
        try:
            ClaimRef(record.namespace, record.name, record.uid).check()
            if key != record.uid:
                raise ClaimPrepareError(f"recorded under {key[:64]!r}")
        except ClaimPrepareError as exc:
            log.error("DRA checkpoint: refused a record (%s); it is ignored and nothing it names is touched", exc)
            continue
        kept[key] = _confined(record, own)
    return kept


def _confined(record: ClaimRecord, own: OwnPaths) -> ClaimRecord:
    uid = record.uid
    refused = []
    spec = record.cdi_spec
    if spec is not None and spec != own.spec(uid):
        refused.append(f"CDI spec {spec!r} (its own is {own.spec(uid)})")
        spec = own.spec(uid)
    daemon = record.mps_daemon
    if daemon is not None and daemon != own.daemon(uid):
        refused.append(f"MPS daemon directory {daemon!r} (its own is {own.daemon(uid)})")
        daemon = own.daemon(uid)
    env, mounts = claim_mps_edits(Path(daemon)) if daemon is not None else ({}, ())
    if record.env and record.env != env:
        refused.append(f"container env {sorted(record.env)}")
    if record.mounts and record.mounts != mounts:
        refused.append(f"mounts {[host for _, host in record.mounts]}")
    devices = tuple(replace(d, cdi_ids=(cdi_id(own.driver, uid, d.device),)) for d in record.devices)
    if devices != record.devices:
        refused.append("CDI device IDs of another claim")
    if refused:
        log.error("DRA checkpoint: claim %s names what this plugin never makes: %s; refused, left alone",
                  uid, "; ".join(refused))  # fmt: skip
    return replace(
        record,
        cdi_spec=spec,
        mps_daemon=daemon,
        env=env if record.env else {},
        mounts=mounts if record.mounts else (),
        devices=devices,
    )
