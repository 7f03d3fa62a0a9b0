"""The one MIG lifecycle: claim placements (create + persist), free them (destroy + persist), resume, restore.

Both front ends use it: the device plugin's dynamic MIG (with its own checkpoint) and DRA's claims (whose
checkpoint records the claims; `DynamicMig.over` without one).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence

from gpuslice.discovery import MigControl, MigControlError
from gpuslice.gpu import MigInstance, catalogue_for
from gpuslice.records import record
from gpuslice.sharing.dynamic.checkpoint import MigCheckpoint, MigCheckpointError
from gpuslice.sharing.dynamic.geometry import DynamicMigGeometry, GeometryConflict, Holding
from gpuslice.sharing.dynamic.plan import slot_id
from gpuslice.sharing.model import Resource

log = logging.getLogger("gpuslice.plugin.dynamic_mig")

# resource name -> device IDs some pod container holds, as the kubelet's pod-resources List reports them
InUse = Mapping[str, set[str]]
Lister = Callable[[], InUse]
LiveInstances = Callable[[], Iterable[MigInstance] | None]


class ClaimError(RuntimeError):
    """The MIG device could not be created or the claim not persisted; nothing stays held."""


@record
class ResumeReport:
    """How a start-up found its geometry: `source` is checkpoint | pod-resources | live-instances | empty."""

    source: str
    held: int
    problem: str | None = None
    orphans_destroyed: int = 0


class DynamicMig:
    """Couples the geometry (what is held) with the device (MigControl) and the checkpoint (what survives).

    `claim` reserves first, so no two requests can get overlapping slices, then creates the instances
    and persists before answering; any failure undoes all of it. `free` destroys then releases: a
    placement whose instance cannot be destroyed stays held, because its slices are still taken.
    """

    def __init__(
        self,
        geometry: DynamicMigGeometry,
        control: MigControl,
        checkpoint: MigCheckpoint | None = None,
        live_instances: LiveInstances | None = None,
    ) -> None:
        self.geometry = geometry
        self.control = control
        self.checkpoint = checkpoint
        self._live = live_instances
        self._device_lock = threading.Lock()  # one MIG create/destroy at a time: the driver serialises them too
        self._save_lock = threading.Lock()

    @classmethod
    def over(
        cls, resources: Iterable[Resource], control: MigControl, checkpoint: MigCheckpoint | None = None
    ) -> DynamicMig:
        """The lifecycle of the dynamic placements in `resources`, listing live MIG devices on their GPUs."""
        geometry = DynamicMigGeometry(resources)
        gpu_indices = sorted(gpu.index for gpu in geometry.gpus)
        return cls(geometry, control, checkpoint, lambda: control.live_instances(gpu_indices))

    def claim(self, device_ids: Sequence[str]) -> dict[str, MigInstance]:
        """Hold, create and persist every slot; SlotUnavailable or ClaimError leave nothing behind."""
        slots = self.geometry.reserve(device_ids)
        created: dict[str, MigInstance] = {}
        try:
            for slot in slots:
                with self._device_lock:
                    mig = self.control.create(slot.gpu.index, slot.profile.name, slot.start)
                created[slot.id] = mig
                self.geometry.attach(slot.id, mig)
                log.info("created %s (%s) for %s", mig.uuid, slot.profile.name, slot.id)
            self.save()
        except (MigControlError, OSError) as exc:
            self._undo(created)
            self.geometry.release(slot.id for slot in slots)
            self.save_quietly()
            raise ClaimError(f"cannot create the MIG device for {', '.join(device_ids)}: {exc}") from exc
        return created

    def free(self, holdings: Iterable[Holding]) -> tuple[Holding, ...]:
        """Destroy and release these holdings (skipping any replaced meanwhile); returns those released."""
        released: list[Holding] = []
        for holding in holdings:
            if self.geometry.holding(holding.slot_id) != holding:
                continue  # released or re-claimed since the caller looked
            if holding.mig is not None:
                try:
                    with self._device_lock:
                        self.control.destroy(holding.gpu_index, holding.mig.gi, holding.mig.ci)
                except MigControlError as exc:
                    if not self._gone(holding.mig):
                        log.error("cannot destroy %s for %s: %s; its slices stay held", holding.mig.uuid,
                                  holding.slot_id, exc)  # fmt: skip
                        continue
                    log.warning("%s for %s was already gone from the GPU", holding.mig.uuid, holding.slot_id)
            released.extend(self.geometry.release([holding.slot_id]))
            log.info("released %s (%s)", holding.slot_id, holding.mig.uuid if holding.mig else "no MIG device")
        if released:
            self.save_quietly()
        return tuple(released)

    def save(self) -> None:
        """Persist the current holdings; the snapshot is taken under the lock so the newest state lands last."""
        if self.checkpoint is None:
            return
        with self._save_lock:
            self.checkpoint.save(self.geometry.holdings())

    def resume(self, lister: Lister | None) -> ResumeReport:
        """Before serving: restore the checkpoint, or rebuild it from pod-resources when it cannot be trusted.

        A missing file is a first start: pod-resources is asked too (a lost file must not forget pods).
        Then live MIG devices are matched to holdings, and those on our GPUs that nothing holds are destroyed.
        """
        problem = None
        recorded = None
        if self.checkpoint is not None:
            for leftover in self.checkpoint.remove_leftovers():
                log.warning("removed %s, left by a checkpoint write that was killed", leftover)
            try:
                recorded = self.checkpoint.load()
                if recorded is not None:
                    self.geometry.restore(recorded)
            except (MigCheckpointError, GeometryConflict) as exc:
                problem = str(exc)
                where = self.checkpoint.quarantine()
                log.error("dynamic MIG checkpoint %s cannot be trusted (%s); kept as %s; rebuilding from pod-resources",
                          self.checkpoint.path, problem, where)  # fmt: skip
                recorded = None
        source = "checkpoint" if recorded is not None else self._rebuild(lister)
        orphans = self.reconcile()
        self.save()
        report = ResumeReport(source, self.geometry.held_count, problem, orphans)
        log.info("dynamic MIG resumed from %s: %d placements held", source, report.held)
        return report

    def reconcile(self, destroy_orphans: bool = True) -> int:
        """Match the live MIG devices to the holdings (a holding whose device is gone keeps no device), and
        destroy those on our GPUs that nothing holds; returns how many. Without an inventory: nothing.

        `destroy_orphans=False` only logs them and returns how many there are: for a caller whose record
        of what is ours cannot prove it (any writer of its file can name a GPU as ours).
        """
        live = self._live_instances()
        if live is None:  # without a trustworthy inventory, leave the device alone
            return 0
        self._match_live(live)
        if destroy_orphans:
            return self._destroy_orphans(live)
        orphans = self._orphans(live)
        for mig, device_id in orphans:
            log.warning("MIG device %s at %s is held by nothing; left alone", mig.uuid, device_id)
        return len(orphans)

    def recreate_lost(self) -> list[str]:
        """Create again the device of every holding that has none (its GPU was reset, or the backend's
        instances live in memory): a restore for holders whose containers expect the device. Returns problems."""
        problems = []
        for holding in self.geometry.holdings():
            if holding.mig is not None:
                continue
            try:
                with self._device_lock:
                    mig = self.control.create(holding.gpu_index, holding.profile, holding.start)
            except MigControlError as exc:
                problems.append(f"cannot re-create the MIG device of {holding.slot_id}: {exc}")
                continue
            self.geometry.attach(holding.slot_id, mig)
            log.info("re-created %s (%s) for %s", mig.uuid, holding.profile, holding.slot_id)
        return problems

    def _gone(self, mig: MigInstance) -> bool:
        """True when the inventory says `mig` no longer exists (so there is nothing left to destroy)."""
        live = self._live_instances()
        return live is not None and all((m.parent_uuid, m.gi, m.ci) != (mig.parent_uuid, mig.gi, mig.ci) for m in live)

    def _rebuild(self, lister: Lister | None) -> str:
        self.geometry.restore(())
        if lister is not None:
            try:
                in_use = lister()
            except Exception as exc:  # any transport failure: fall back to what the device shows
                log.error("pod-resources is not reachable (%s); holding every live MIG device instead", exc)
            else:
                listed = [i for name in self.geometry.resource_names for i in sorted(in_use.get(name, ()))]
                self.geometry.hold_listed(listed)
                return "pod-resources" if listed else "empty"
        # Nobody can tell us what is in use: keep every live instance (never double-book); the watcher frees
        # those no pod lists once the admission grace has passed.
        slots = [self._slot_of(mig) for mig in self._live_instances() or ()]
        held = self.geometry.hold_listed([s for s in slots if s is not None], seen=False)
        return "live-instances" if held else "empty"

    def _live_instances(self) -> list[MigInstance] | None:
        """The MIG devices on our GPUs now, or None when that cannot be known."""
        if self._live is None:
            return None
        try:
            live = self._live()
            return None if live is None else list(live)
        except (MigControlError, RuntimeError) as exc:
            log.error("cannot list the live MIG devices: %s", exc)
            return None

    def _slot_of(self, mig: MigInstance) -> str | None:
        gpu = self.geometry.gpu(mig.parent_uuid)
        catalogue = catalogue_for(gpu.product_name, gpu.memory_mib) if gpu is not None else None
        if catalogue is None:
            return None
        device_id = slot_id(mig.parent_uuid, catalogue.profile(mig.profile), mig.placement_start)
        return device_id if self.geometry.is_dynamic(device_id) else None

    def _match_live(self, live: Sequence[MigInstance]) -> None:
        by_slot = {s: mig for mig in live if (s := self._slot_of(mig)) is not None}
        for holding in self.geometry.holdings():
            mig = by_slot.get(holding.slot_id)
            if mig is not None and holding.mig != mig:
                self.geometry.attach(holding.slot_id, mig)
            elif mig is None and holding.mig is not None:
                # Gone (GPU reset, or we crashed between destroy and checkpoint): nothing left to destroy.
                log.warning("%s is held but its MIG device %s is gone from the GPU", holding.slot_id, holding.mig.uuid)
                self.geometry.attach(holding.slot_id, None)

    def _orphans(self, live: Sequence[MigInstance]) -> list[tuple[MigInstance, str]]:
        """Live devices at a placement of ours that no holding holds, with that placement's ID."""
        placed = ((mig, self._slot_of(mig)) for mig in live)
        return [(mig, i) for mig, i in placed if i is not None and self.geometry.holding(i) is None]

    def _destroy_orphans(self, live: Sequence[MigInstance]) -> int:
        destroyed = 0
        for mig, device_id in self._orphans(live):
            try:
                with self._device_lock:
                    self.control.destroy(mig.parent_index, mig.gi, mig.ci)
                destroyed += 1
                log.warning("destroyed orphan MIG device %s at %s: no pod and no record holds it", mig.uuid, device_id)
            except MigControlError as exc:
                log.error("cannot destroy orphan MIG device %s: %s", mig.uuid, exc)
        return destroyed

    def _undo(self, created: Mapping[str, MigInstance]) -> None:
        for device_id, mig in created.items():
            try:
                with self._device_lock:
                    self.control.destroy(mig.parent_index, mig.gi, mig.ci)
            except MigControlError as exc:
                log.error("rollback: cannot destroy %s for %s: %s", mig.uuid, device_id, exc)

    def save_quietly(self) -> None:
        """save(), logging instead of raising: for paths where the state change itself already happened."""
        try:
            self.save()
        except OSError as exc:
            log.error("cannot write the dynamic MIG checkpoint: %s", exc)
