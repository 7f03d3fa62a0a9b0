"""NodePrepareResources / NodeUnprepareResources for one claim: MIG, MPS, time-slicing, CDI, checkpoint."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuslice import records
from gpuslice.allocation.cdi import CONTROL_NODES, CdiError
from gpuslice.discovery import DEFAULT_TIMESLICE_LEVEL, MigControl, MigControlError, TimeSliceControl, TimeSliceError
from gpuslice.dra.api import ApiError, ResourceApi
from gpuslice.dra.cdi import (
    ClaimDeviceEdits,
    ClaimEdits,
    cdi_id,
    claim_spec,
    leftover_claim_files,
    remove_claim_spec,
    write_claim_spec,
)
from gpuslice.dra.checkpoint import ClaimCheckpoint, ClaimRecord, CreatedMig, PreparedDevice
from gpuslice.dra.claims import AllocatedDevice, ClaimPrepareError, ClaimRef, allocation_for
from gpuslice.dra.devices import DraDevice
from gpuslice.dra.mps import ClaimMpsDaemons, MpsClaimError, claim_mps_edits, daemon_dir
from gpuslice.dra.owned import OwnPaths, confine
from gpuslice.fsutil.atomic import leftover_temp_files
from gpuslice.gpu import Gpu, MigInstance
from gpuslice.sharing import Isolation, Resource, weakest
from gpuslice.sharing.dynamic import ClaimError, DynamicMig, GeometryConflict, Holding, SlotUnavailable

if TYPE_CHECKING:  # a claim's config, decoded (gpuslice.dra.claims loads the models with the first one)
    from gpuslice.dra.opaque import MpsConfig

log = logging.getLogger("gpuslice.dra")


@records.record
class PrepareParts:
    """The node's side of preparation: where specs go and what can act on the hardware (None: cannot)."""

    cdi_dir: Path
    dev_root: str = "/"
    driver_edits: Mapping[str, Any] = field(default_factory=dict)  # the driver's files and hooks, found at start
    control_nodes: tuple[str, ...] = CONTROL_NODES  # those the node has (allocation.cdi.present_control_nodes)
    mig: MigControl | None = None
    placements: Sequence[Resource] = ()  # the plan's resources: their dynamic MIG placements, for the MIG lifecycle
    mps: ClaimMpsDaemons | None = None
    timeslice: TimeSliceControl | None = None


class _Deadline:
    def __init__(self, until: float, ref: ClaimRef) -> None:
        self.until = until
        self.ref = ref

    def left(self) -> float:
        return self.until - time.monotonic()

    def check(self, step: str) -> None:
        if self.left() <= 0:
            raise ClaimPrepareError(f"claim {self.ref}: ran out of time before {step}; nothing is left prepared")


@dataclass(eq=False)
class Preparer:
    """Prepares claims for one driver and pool; every change is checkpointed before the next step.

    Calls are serialised (one lock), so concurrent kubelet calls can never hand one device to two claims;
    a call that cannot get the lock before its deadline gets a per-claim error and the kubelet retries.
    """

    driver: str
    pool: str
    devices: Callable[[], Mapping[str, DraDevice]]
    healthy: Callable[[DraDevice], bool]
    api: ResourceApi
    checkpoint: ClaimCheckpoint
    parts: PrepareParts

    def __post_init__(self) -> None:
        parts = self.parts
        self._lock = threading.Lock()
        self._own = OwnPaths(self.driver, parts.cdi_dir, parts.mps.root if parts.mps is not None else None)
        self._records: dict[str, ClaimRecord] = confine(self.checkpoint.load(), self._own)
        # The node core's MIG lifecycle and placement rules; DRA's records, not its checkpoint, say what is held.
        self.dynamic = DynamicMig.over(parts.placements, parts.mig) if parts.mig is not None else None
        self._adopt()

    # Queries -----------------------------------------------------------------------------------

    def records(self) -> dict[str, ClaimRecord]:
        with self._lock:
            return dict(self._records)

    def completed(self, uid: str) -> bool:
        """Whether the claim is prepared, read without the lock: a hint for reading claims ahead, which must
        not wait behind a preparation in progress (prepare itself decides under the lock)."""
        record = self._records.get(uid)
        return record is not None and record.state == "PrepareCompleted"

    # Restart -----------------------------------------------------------------------------------

    def resume(self) -> list[str]:
        """After a restart: undo half-done preparations; bring back MIG devices a completed claim lost."""
        notes = []
        with self._lock:
            loaded = dict(self._records)  # as the checkpoint holds them
            if self.dynamic is not None:
                # The live devices matched to the records' placements. Those no claim holds are left alone: a
                # checkpoint anyone can seal must not decide which GPUs' devices get destroyed.
                orphans = self.dynamic.reconcile(destroy_orphans=False)
                if orphans:
                    notes.append(f"{orphans} MIG device(s) on dynamic GPUs are held by no claim; left alone")
            for uid, record in list(self._records.items()):
                if record.state == "PrepareStarted":
                    problems = self._undo(record)
                    if problems:
                        notes.append(f"claim {uid}: rollback incomplete: {'; '.join(problems)}")
                        continue
                    del self._records[uid]
                    notes.append(f"claim {uid}: rolled back an unfinished preparation")
            if self.dynamic is not None:
                notes += self.dynamic.recreate_lost()
            for uid, record in list(self._records.items()):
                try:
                    restored = self._restore_migs(record)
                except (ClaimPrepareError, CdiError) as exc:
                    notes.append(f"claim {uid}: its spec cannot be rewritten: {exc}")
                    continue
                if restored is not record:
                    self._records[uid] = restored
                    notes.append(f"claim {uid}: its MIG devices are back (re-created or renumbered)")
            notes += self._remove_leftovers()
            try:
                # Only what changed is written: a start that found nothing to undo left the file as it was
                # (a save is two fsyncs, 1-9 ms of every start).
                if self._records != loaded:
                    self._save()
            except OSError as exc:  # logged, not fatal: a start that exits here would crash-loop
                log.error("cannot write the DRA checkpoint %s: %s", self.checkpoint.path, exc.strerror or exc)
        for note in notes:
            log.info("%s", note)
        return notes

    def _remove_leftovers(self) -> list[str]:
        """What a kill mid-prepare left: specs no record holds, temp files of spec and checkpoint writes."""
        notes = []
        try:
            leftovers = leftover_claim_files(self.parts.cdi_dir, self.driver, self._records)
            leftovers += leftover_temp_files(self.checkpoint.path)
        except (CdiError, OSError) as exc:
            return [f"cannot look for leftovers of unfinished preparations: {exc}"]
        for path in leftovers:
            try:
                path.unlink(missing_ok=True)
                notes.append(f"removed {path}, left by an unfinished preparation")
            except OSError as exc:
                notes.append(f"cannot remove {path}, left by an unfinished preparation: {exc.strerror or exc}")
        return notes

    def _adopt(self) -> None:
        """Hold every recorded MIG device in the geometry, claim by claim; a claim's devices that break the
        hardware rules, or are no dynamic placement of this node, are refused: never destroyed nor created."""
        if self.dynamic is None:
            return
        held: list[Holding] = []
        for uid, record in list(self._records.items()):
            holdings = [self._holding(created) for created in record.migs]
            try:
                if None in holdings:
                    raise GeometryConflict("a recorded device is no dynamic MIG placement of this node")
                self.dynamic.geometry.restore([*held, *(h for h in holdings if h is not None)])
            except GeometryConflict as exc:
                log.error("DRA checkpoint: claim %s: its MIG devices are refused (%s); they are left alone", uid, exc)
                self._records[uid] = replace(record, migs=())
                continue
            held += [h for h in holdings if h is not None]
        self.dynamic.geometry.restore(held)

    def _holding(self, created: CreatedMig) -> Holding | None:
        device = self.devices().get(created.device)
        assert self.dynamic is not None
        slot = self.dynamic.geometry.slot(device.advertised.id) if device is not None else None
        if device is None or slot is None:
            return None
        mig = _mig_of(device, created)
        return Holding(slot.id, created.gpu_uuid, created.gpu_index, created.profile, created.start, slot.size,
                       time.time(), mig, seen=True)  # fmt: skip

    def _restore_migs(self, record: ClaimRecord) -> ClaimRecord:
        """The record with its MIG devices as the geometry holds them now (found live, or re-created)."""
        if self.dynamic is None or not record.migs or record.state != "PrepareCompleted":
            return record
        migs = []
        for created in record.migs:
            device = self.devices().get(created.device)
            holding = self.dynamic.geometry.holding(device.advertised.id) if device is not None else None
            mig = holding.mig if holding is not None else None
            migs.append(created if mig is None else _created(created.device, mig))
        if tuple(migs) == record.migs:
            return record
        updated = replace(record, migs=tuple(migs))
        self._write_spec(updated)
        return updated

    # Prepare -----------------------------------------------------------------------------------

    def prepare(self, ref: ClaimRef, budget_s: float) -> ClaimRecord:
        """The claim's prepared devices (cached when already prepared); ClaimPrepareError says why not."""
        ref.check()
        deadline = _Deadline(time.monotonic() + budget_s, ref)
        if not self._lock.acquire(timeout=max(deadline.left(), 0)):
            raise ClaimPrepareError(f"claim {ref}: another preparation is still running; try again")
        try:
            record = self._records.get(ref.uid)
            if record is not None and record.state == "PrepareCompleted":
                return record
            if record is not None:
                problems = self._undo(record)
                if problems:
                    raise ClaimPrepareError(f"claim {ref}: an earlier attempt cannot be undone: {'; '.join(problems)}")
                del self._records[ref.uid]
                self._save()
            return self._prepare_locked(ref, deadline)
        finally:
            self._lock.release()

    def _read_claim(self, ref: ClaimRef) -> tuple[AllocatedDevice, ...]:
        try:
            claim = self.api.get_claim(ref.namespace, ref.name)
        except ApiError as exc:
            raise ClaimPrepareError(f"claim {ref}: cannot read it from the API server: {exc}") from exc
        if claim is None:
            raise ClaimPrepareError(f"claim {ref} does not exist")
        return allocation_for(claim, ref, self.driver)

    def _check(self, ref: ClaimRef, allocated: Sequence[AllocatedDevice]) -> list[tuple[AllocatedDevice, DraDevice]]:
        devices = self.devices()
        owners = {name: uid for uid, record in self._records.items() if uid != ref.uid for name in record.device_names}
        chosen = []
        for entry in allocated:
            where = f"claim {ref}: device {entry.device}"
            if entry.pool != self.pool:
                raise ClaimPrepareError(f"{where}: pool {entry.pool} is not this node's pool {self.pool}")
            device = devices.get(entry.device)
            if device is None:
                raise ClaimPrepareError(f"{where} is not published by this node")
            if not self.healthy(device):
                raise ClaimPrepareError(f"{where} is unhealthy")
            if entry.device in owners and not entry.admin_access:
                raise ClaimPrepareError(f"{where} is already prepared for claim {owners[entry.device]}")
            if device.placement is not None and self.dynamic is not None:
                blocked = self.dynamic.geometry.why_unavailable(device.advertised.id)  # the three hardware rules
                if blocked is not None:
                    raise ClaimPrepareError(f"{where} cannot be created: {blocked}")
            config = entry.config
            if config is not None and config.device_type != device.kind:
                raise ClaimPrepareError(f"{where}: a {config.kind} does not apply to a {device.kind} device")
            chosen.append((entry, device))
        return chosen

    def _prepare_locked(self, ref: ClaimRef, deadline: _Deadline) -> ClaimRecord:
        allocated = self._read_claim(ref)
        chosen = self._check(ref, allocated)
        deadline.check("changing anything")
        record = ClaimRecord(ref.uid, ref.namespace, ref.name, "PrepareStarted")
        # Held in memory only: written now it would name nothing to undo. Each step that changes the hardware
        # saves the record with what it did (MPS before it starts the daemon), and the spec is removed at start
        # when no record holds it, so a crash at any point leaves nothing a restart cannot undo.
        self._records[ref.uid] = record
        try:
            record = self._act(ref, record, chosen, deadline)
        except (ClaimPrepareError, MigControlError, MpsClaimError, TimeSliceError, CdiError, OSError) as exc:
            problems = self._undo(self._records[ref.uid])
            if not problems:
                del self._records[ref.uid]
            self._save()
            suffix = f" (rollback incomplete: {'; '.join(problems)})" if problems else ""
            message = str(exc) if isinstance(exc, ClaimPrepareError) else f"claim {ref}: {exc}"
            raise ClaimPrepareError(message + suffix) from exc
        log.info("prepared claim %s: %s (%s)", ref, ", ".join(record.device_names), record.isolation)
        return record

    def _act(
        self,
        ref: ClaimRef,
        record: ClaimRecord,
        chosen: Sequence[tuple[AllocatedDevice, DraDevice]],
        deadline: _Deadline,
    ) -> ClaimRecord:
        placements = [device for _, device in chosen if device.placement is not None]
        if placements:
            where = f"claim {ref}: device {placements[0].name}"
            deadline.check(f"creating MIG device {placements[0].name}")
            if self.dynamic is None:
                raise ClaimPrepareError(f"{where}: this backend cannot create MIG devices")
            try:
                made = self.dynamic.claim([device.advertised.id for device in placements])
            except (SlotUnavailable, ClaimError) as exc:
                raise ClaimPrepareError(f"claim {ref}: {exc}") from exc
            created = tuple(_created(device.name, made[device.advertised.id]) for device in placements)
            record = self._update(replace(record, migs=created))
        env: dict[str, str] = {}
        mounts: tuple[tuple[str, str], ...] = ()
        isolations = []
        mps_gpus: dict[str, Gpu] = {}
        mps_config: MpsConfig | None = None
        for entry, device in chosen:
            sharing = entry.config.sharing if entry.config is not None else None
            isolations.append(device.advertised.isolation)
            if sharing is None:
                continue
            if sharing.strategy == "MPS":
                if mps_config is not None and sharing.mps != mps_config:
                    raise ClaimPrepareError(
                        f"claim {ref}: its requests ask for different MPS settings; one daemon serves a claim"
                    )
                mps_config = sharing.mps
                mps_gpus.setdefault(device.gpu.uuid, device.gpu)
                isolations.append(Isolation.MPS)
            else:
                isolations.append(Isolation.NONE)
                if device.kind == "gpu" and sharing.interval != "Default":
                    deadline.check(f"setting the time-slice interval of {device.name}")
                    if self.parts.timeslice is None:
                        raise ClaimPrepareError(f"claim {ref}: this backend cannot set time-slice intervals")
                    self.parts.timeslice.set_level(device.gpu.uuid, sharing.level)
                    record = self._update(replace(record, timeslice_gpus=(*record.timeslice_gpus, device.gpu.uuid)))
        if mps_config is not None:
            deadline.check("starting the MPS daemon")
            if self.parts.mps is None:
                raise ClaimPrepareError(f"claim {ref}: MPS is not available on this node (no MPS root)")
            record = self._update(replace(record, mps_daemon=str(daemon_dir(self.parts.mps.root, ref.uid))))
            env, mounts = claim_mps_edits(self.parts.mps.start(ref.uid, list(mps_gpus.values()), mps_config))
        deadline.check("writing the CDI spec")
        prepared = tuple(
            PreparedDevice((entry.request,), entry.pool, entry.device, (cdi_id(self.driver, ref.uid, entry.device),))
            for entry, _ in chosen
        )
        record = replace(
            record,
            devices=prepared,
            env=env,
            mounts=mounts,
            isolation=weakest(isolations).summary,
        )
        # One save for the spec and the completion, after the spec is on disk (write_spec syncs it): before
        # that save a crash leaves the spec to the start's leftover removal, never a completed claim without one.
        return self._update(replace(self._write_spec(record), state="PrepareCompleted"))

    def _write_spec(self, record: ClaimRecord) -> ClaimRecord:
        devices = self.devices()
        migs = {created.device: created for created in record.migs}
        entries = []
        for prepared in record.devices:
            device = devices.get(prepared.device)
            if device is None:
                raise ClaimPrepareError(f"claim {record.uid}: device {prepared.device} is no longer published")
            entries.append(ClaimDeviceEdits(prepared.device, device.gpu, _mig_of(device, migs.get(prepared.device))))
        spec = claim_spec(
            self.driver,
            record.uid,
            entries,
            ClaimEdits(record.env, record.mounts, self.parts.driver_edits),
            self.parts.dev_root,
            self.parts.control_nodes,
        )
        path = write_claim_spec(self.parts.cdi_dir, self.driver, record.uid, spec)
        return replace(record, cdi_spec=str(path))

    def _update(self, record: ClaimRecord) -> ClaimRecord:
        self._records[record.uid] = record
        self._save()
        return record

    # Unprepare ---------------------------------------------------------------------------------

    def unprepare(self, ref: ClaimRef, budget_s: float) -> None:
        """Undo exactly what prepare did; a claim we never prepared is already unprepared."""
        ref.check()
        if not self._lock.acquire(timeout=max(budget_s, 0)):
            raise ClaimPrepareError(f"claim {ref}: another preparation is still running; try again")
        try:
            record = self._records.get(ref.uid)
            if record is None:
                return
            problems = self._undo(record)
            if problems:
                raise ClaimPrepareError(f"claim {ref}: unprepare incomplete: {'; '.join(problems)}")
            del self._records[ref.uid]
            self._save()
            log.info("unprepared claim %s", ref)
        finally:
            self._lock.release()

    def _undo(self, record: ClaimRecord) -> list[str]:
        """Undo in reverse order; what succeeded is dropped from the record, what failed stays for a retry."""
        problems = []
        if record.cdi_spec:
            try:
                remove_claim_spec(self.parts.cdi_dir, self.driver, record.uid)
                # Saved with the undo's later steps or by the caller: removing it again is harmless, so a
                # checkpoint still naming a removed spec after a crash is safe.
                record = replace(record, cdi_spec=None)
                self._records[record.uid] = record
            except CdiError as exc:
                problems.append(str(exc))
        if record.mps_daemon and self.parts.mps is not None:
            self.parts.mps.stop(record.uid)
            record = self._update(replace(record, mps_daemon=None))
        for gpu_uuid in record.timeslice_gpus:
            if self.parts.timeslice is None:
                break
            try:
                self.parts.timeslice.set_level(gpu_uuid, DEFAULT_TIMESLICE_LEVEL)
                record = self._update(
                    replace(record, timeslice_gpus=tuple(g for g in record.timeslice_gpus if g != gpu_uuid))
                )
            except TimeSliceError as exc:
                problems.append(str(exc))
        for created in reversed(record.migs):
            problem = self._destroy(created)
            if problem:
                problems.append(problem)
            else:
                record = self._update(replace(record, migs=tuple(m for m in record.migs if m != created)))
        return problems

    def _destroy(self, created: CreatedMig) -> str | None:
        device = self.devices().get(created.device)
        if self.dynamic is None or device is None:
            return f"cannot destroy MIG device {created.uuid}: this backend has no MIG control"
        holding = self.dynamic.geometry.holding(device.advertised.id)
        if holding is None or self.dynamic.free([holding]):
            return None  # not held (never created, or refused at start), or destroyed now
        return f"cannot destroy MIG device {created.uuid} of {created.device}; its slices stay held"

    def _save(self) -> None:
        self.checkpoint.save(self._records)


def _created(device: str, mig: MigInstance) -> CreatedMig:
    return CreatedMig(device, mig.parent_index, mig.parent_uuid, mig.profile, mig.placement_start, mig.gi, mig.ci,
                      mig.uuid, mig.gi_cap_minor, mig.ci_cap_minor)  # fmt: skip


def _mig_of(device: DraDevice, created: CreatedMig | None) -> MigInstance | None:
    if created is None:
        return device.mig
    planned = device.advertised.mig
    assert planned is not None
    return replace(planned, uuid=created.uuid, gi=created.gi, ci=created.ci, gi_cap_minor=created.gi_cap_minor,
                   ci_cap_minor=created.ci_cap_minor)  # fmt: skip
