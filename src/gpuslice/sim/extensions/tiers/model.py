"""Sharing tiers: how whole, time-sliced, MPS-shared and MIG-partitioned GPUs take fractional jobs, and their speed.

A job on a shared GPU is a `ShareDemand`: the fraction of the GPU's compute it keeps busy when alone (`compute`)
and the GPU memory it needs. Each mechanism maps it differently (the rules the plugin enforces):

- whole: the job gets a whole GPU to itself, whatever its fraction.
- time-slicing (R replicas per GPU): one replica, whatever its fraction or memory; nothing is checked.
  Contexts take turns: with n > 1 jobs a `switch_overhead` share of the GPU's time is lost, and when the
  fractions add up to more than what is left every job slows down in proportion. Memory is not limited:
  when the jobs' memory adds up to more than the GPU has, the GPU is over-committed (someone will OOM).
- MPS (R replicas): k = ceil(R x max(compute, memory / GPU memory)) replicas of one GPU, each worth 1/R of
  the threads (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE) and of the memory (pinned-memory limit); kernels run
  concurrently, but L2 and memory bandwidth are shared: every job on the GPU runs 1 / (1 + i (n - 1)) as fast.
- MIG: the smallest profile (memory slices, then SM slices) of the GPU's real catalogue whose SM share
  covers the compute and whose memory (the GPU's memory x slices / 8) covers the need; created at a free
  placement by the catalogue's placement rule (dynamic MIG), or taken from a fixed layout (static).
  Isolated: it runs at full speed.
A GPU that holds a whole-GPU job (training) takes nothing else; a shared GPU takes no whole-GPU job.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from typing import Any

from gpuslice.gpu import Gpu, InvalidMigLayout, MigCatalogue, MigProfile, assign_placements, catalogue_for
from gpuslice.gpu.mig import free_placements

SHARE_EPSILON = 1e-9


class Mechanism(enum.Enum):
    WHOLE = "whole"
    TIME_SLICING = "time-slicing"
    MPS = "mps"
    MIG = "mig"


@dataclass(frozen=True)
class TierParams:
    """The knobs of the mechanisms (defaults: NVIDIA-style 4 replicas; interference figures are assumptions)."""

    replicas: int = 4
    switch_overhead: float = 0.10
    mps_interference: float = 0.05
    mig_layout: tuple[str, ...] | None = None  # None: dynamic MIG; else every MIG GPU has this fixed layout

    def __post_init__(self) -> None:
        if self.replicas < 1:
            raise ValueError(f"replicas must be >= 1, got {self.replicas}")
        if not 0 <= self.switch_overhead < 1 or self.mps_interference < 0:
            raise ValueError("switch_overhead must be in [0, 1) and mps_interference >= 0")


@dataclass(frozen=True)
class ShareDemand:
    """What a fractional job needs of one GPU."""

    compute: float  # fraction of the GPU's compute it keeps busy alone, in (0, 1]
    memory_mib: int

    def __post_init__(self) -> None:
        if not 0 < self.compute <= 1 or self.memory_mib < 0:
            raise ValueError(f"compute must be in (0, 1] and memory >= 0, got {self.compute}, {self.memory_mib}")


@dataclass
class Share:
    """One job's hold on a shared GPU."""

    job: int
    demand: ShareDemand
    replicas: int = 0  # time-slicing / MPS
    placement: tuple[int, int] | None = None  # MIG (start, size)
    profile: str = ""


@dataclass
class GpuSlot:
    """One physical GPU in the tier simulation: its mechanism and who holds it."""

    gpu: Gpu
    mechanism: Mechanism
    params: TierParams
    catalogue: MigCatalogue | None = None
    exclusive: int | None = None  # job holding the whole GPU
    shares: dict[int, Share] = field(default_factory=dict)
    static: list[tuple[MigProfile, int]] = field(default_factory=list)  # fixed MIG instances (profile, start)
    _key: tuple[Any, ...] | None = field(default=None, repr=False)

    @classmethod
    def build(cls, gpu: Gpu, mechanism: Mechanism, params: TierParams) -> GpuSlot:
        slot = cls(gpu, mechanism, params)
        if mechanism is Mechanism.MIG:
            slot.catalogue = catalogue_for(gpu.product_name, gpu.memory_mib)
            if slot.catalogue is None:
                raise ValueError(f"GPU {gpu.product_name!r} has no MIG; it cannot be in a MIG tier")
            if params.mig_layout is not None:
                starts = assign_placements(slot.catalogue, list(params.mig_layout))
                slot.static = [(slot.catalogue.profile(n), s) for n, s in zip(params.mig_layout, starts, strict=True)]
        return slot

    @property
    def empty(self) -> bool:
        return self.exclusive is None and not self.shares

    @property
    def takes_whole_jobs(self) -> bool:
        """A statically partitioned GPU never holds a whole-GPU job; others do when empty."""
        return not self.static

    @property
    def jobs(self) -> int:
        return len(self.shares) + (self.exclusive is not None)

    def state_key(self) -> tuple[Any, ...]:
        """Everything `fit` depends on: slots with equal keys accept exactly the same demands (cached)."""
        if self._key is None:
            # id(params): the slots of one run share one TierParams; hashing the dataclass each time is slow.
            base = (self.mechanism, self.gpu.product_name, self.gpu.memory_mib, id(self.params), self.exclusive)
            if self.mechanism is Mechanism.TIME_SLICING:
                self._key = (*base, len(self.shares))
            elif self.mechanism is Mechanism.MPS:
                self._key = (*base, sum(share.replicas for share in self.shares.values()))
            elif self.mechanism is Mechanism.MIG:
                placements = tuple(sorted(share.placement for share in self.shares.values() if share.placement))
                self._key = (*base, placements)
            else:
                self._key = (*base, bool(self.shares))
        return self._key

    # -- fitting a fractional job -------------------------------------------------------------
    def fit(self, job: int, demand: ShareDemand) -> Share | None:
        """The share `demand` would get here now, or None."""
        if self.exclusive is not None:
            return None
        mechanism = self.mechanism
        if mechanism is Mechanism.WHOLE:
            return Share(job, demand) if not self.shares else None
        if mechanism is Mechanism.TIME_SLICING:
            return Share(job, demand, replicas=1) if len(self.shares) < self.params.replicas else None
        if mechanism is Mechanism.MPS:
            need = self.mps_replicas(demand)
            used = sum(share.replicas for share in self.shares.values())
            return Share(job, demand, replicas=need) if need <= self.params.replicas - used else None
        return self._fit_mig(job, demand)

    def mps_replicas(self, demand: ShareDemand) -> int:
        replicas = self.params.replicas
        fraction = max(demand.compute, demand.memory_mib / self.gpu.memory_mib)
        return max(1, math.ceil(fraction * replicas - SHARE_EPSILON))

    def _fit_mig(self, job: int, demand: ShareDemand) -> Share | None:
        catalogue = self.catalogue
        assert catalogue is not None
        if self.static:
            taken = {share.placement for share in self.shares.values()}
            usable = [
                (profile, start)
                for profile, start in self.static
                if (start, profile.memory_slices) not in taken and self._covers(profile, demand)
            ]
            if not usable:
                return None
            instance, start = min(usable, key=lambda item: (item[0].memory_slices, item[0].sm_slices, item[1]))
            return Share(job, demand, placement=(start, instance.memory_slices), profile=instance.name)
        profile = self.smallest_profile(demand)
        if profile is None:
            return None
        occupied = [share.placement for share in self.shares.values() if share.placement is not None]
        starts = free_placements(catalogue, profile, occupied)
        if not starts:
            return None
        return Share(job, demand, placement=(starts[0], profile.memory_slices), profile=profile.name)

    def smallest_profile(self, demand: ShareDemand) -> MigProfile | None:
        assert self.catalogue is not None
        fitting = [p for p in self.catalogue.profiles if not p.media_extension and self._covers(p, demand)]
        return min(fitting, key=lambda p: (p.memory_slices, p.sm_slices, p.name), default=None)

    def _covers(self, profile: MigProfile, demand: ShareDemand) -> bool:
        assert self.catalogue is not None
        memory = self.gpu.memory_mib * profile.memory_slices // self.catalogue.memory_slices
        return (
            profile.sm_slices / self.catalogue.sm_slices + SHARE_EPSILON >= demand.compute
            and memory >= demand.memory_mib
        )

    # -- holding and speed --------------------------------------------------------------------
    def add(self, share: Share) -> None:
        self.shares[share.job] = share
        self._key = None

    def hold(self, job: int) -> None:
        """Give the whole (empty) GPU to `job`."""
        if not self.empty:
            raise ValueError(f"GPU {self.gpu.index} is not empty")
        self.exclusive = job
        self._key = None

    def remove(self, job: int) -> None:
        if self.exclusive == job:
            self.exclusive = None
        else:
            del self.shares[job]
        self._key = None

    def speed(self) -> float:
        """How fast each fractional job on this GPU progresses (1 = as fast as alone); same for all of them."""
        count = len(self.shares)
        if count <= 1 or self.mechanism in (Mechanism.WHOLE, Mechanism.MIG):
            return 1.0
        if self.mechanism is Mechanism.MPS:
            return 1.0 / (1.0 + self.params.mps_interference * (count - 1))
        available = 1.0 - self.params.switch_overhead
        wanted = sum(share.demand.compute for share in self.shares.values())
        return min(1.0, available / wanted)

    def busy(self) -> float:
        """Share of the GPU's compute doing work now."""
        if self.exclusive is not None:
            return 1.0
        speed = self.speed()
        return min(1.0, sum(share.demand.compute * speed for share in self.shares.values()))

    def held(self) -> float:
        """Share of the GPU that is taken (what the scheduler can no longer give away)."""
        if self.exclusive is not None or (self.mechanism is Mechanism.WHOLE and self.shares):
            return 1.0
        if self.mechanism in (Mechanism.TIME_SLICING, Mechanism.MPS):
            return sum(share.replicas for share in self.shares.values()) / self.params.replicas
        if self.mechanism is Mechanism.MIG and self.catalogue is not None:
            return sum(s.placement[1] for s in self.shares.values() if s.placement) / self.catalogue.memory_slices
        return 0.0

    def memory_overcommitted(self) -> bool:
        return sum(share.demand.memory_mib for share in self.shares.values()) > self.gpu.memory_mib

    # -- isolation exposure -------------------------------------------------------------------
    def crash_domain(self) -> int:
        """Jobs one application fault on this GPU takes down: all MPS clients (one shared context), else one."""
        return len(self.shares) if self.mechanism is Mechanism.MPS and self.shares else 1

    def memory_domain(self) -> int:
        """Jobs that share memory with no limit between them: every time-slicing replica, else one."""
        return len(self.shares) if self.mechanism is Mechanism.TIME_SLICING and self.shares else 1


def balanced_layout(catalogue: MigCatalogue) -> tuple[str, ...]:
    """mig-parted's "all-balanced" shape on an 8-slice GPU: 2 x 1g, 1 x 2g, 1 x 3g (checked by the placement rule)."""
    if catalogue.memory_slices != 8:
        raise InvalidMigLayout(f"no balanced layout for {catalogue.model_key}")
    pick = {
        (1, 1): 2,
        (2, 2): 1,
        (3, 4): 1,
    }
    layout: list[str] = []
    for profile in catalogue.profiles:
        count = pick.get((profile.sm_slices, profile.memory_slices), 0)
        if count and not profile.media_extension:
            layout += [profile.name] * count
    assign_placements(catalogue, layout)
    return tuple(layout)
