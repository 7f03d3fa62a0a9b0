"""The decision rules: from a tenant's needs and a GPU model to whole GPUs, MIG, MPS or time-slicing."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from gpuslice.advise.gpu_models import GpuFacts
from gpuslice.advise.isolation import ISOLATION, IsolationProfile, Mechanism
from gpuslice.discovery.nodespec import MAX_GPUS_PER_NODE
from gpuslice.gpu import InvalidMigLayout, MigCatalogue, MigProfile, assign_placements

Latency = Literal["sensitive", "batch"]
Tenancy = Literal["trusted", "multi-tenant"]
LATENCIES: tuple[Latency, ...] = ("sensitive", "batch")
TENANCIES: tuple[Tenancy, ...] = ("trusted", "multi-tenant")

# Where each mechanism is deployed from (kustomize directories under deploy/).
OVERLAY: dict[Mechanism, str] = {
    "whole": "deploy/base",
    "mig": "deploy/overlays/mig-mixed",
    "mps": "deploy/overlays/mps",
    "time-slicing": "deploy/overlays/time-slicing",
}
WHOLE_RESOURCE = "nvidia.com/gpu"
DEFAULT_GPUS_PER_NODE = 8  # HGX and DGX boards: the largest node most clusters have
# Shared replicas are advertised under their own name, so no pod gets a slice while asking for a GPU.
SHARED_RESOURCE = "nvidia.com/gpu.shared"


class AdviceError(ValueError):
    """Needs that cannot be advised on (a non-positive memory figure, zero workloads per GPU)."""


@dataclass(frozen=True)
class TenantNeeds:
    """What a tenant tells us: how it runs, whom it shares with, how big each workload is, how many per GPU."""

    latency: Latency
    tenancy: Tenancy
    memory_gib: float
    per_gpu: int
    gpus_per_node: int = DEFAULT_GPUS_PER_NODE  # the most GPUs one node of the cluster has

    def __post_init__(self) -> None:
        if self.latency not in LATENCIES:
            raise AdviceError(f"latency must be one of {', '.join(LATENCIES)}, got {self.latency!r}")
        if self.tenancy not in TENANCIES:
            raise AdviceError(f"tenancy must be one of {', '.join(TENANCIES)}, got {self.tenancy!r}")
        if not math.isfinite(self.memory_gib) or self.memory_gib <= 0:
            raise AdviceError(f"memory per workload must be a positive number of GiB, got {self.memory_gib}")
        if self.per_gpu < 1:
            raise AdviceError(f"workloads per GPU must be at least 1, got {self.per_gpu}")
        if not 1 <= self.gpus_per_node <= MAX_GPUS_PER_NODE:
            raise AdviceError(f"GPUs per node must be 1 to {MAX_GPUS_PER_NODE}, got {self.gpus_per_node}")

    @property
    def memory_mib(self) -> int:
        return math.ceil(self.memory_gib * 1024)


@dataclass(frozen=True)
class MigPlan:
    """Identical MIG instances on every GPU: the profile, how many, and where each sits."""

    catalogue: MigCatalogue
    profile: MigProfile
    profile_memory_mib: int
    max_per_gpu: int  # how many of this profile fit on one GPU at all
    layout: tuple[str, ...]  # the profiles to create on each GPU
    starts: tuple[int, ...]  # memory-slice start of each, from assign_placements


@dataclass(frozen=True)
class MpsPlan:
    """NVIDIA's MPS daemon defaults for this replica count (gpuslice also injects them per container)."""

    replicas: int
    pinned_memory_limit_mib: int  # total memory / replicas
    active_thread_percentage: int  # 100 / replicas


@dataclass(frozen=True)
class Recommendation:
    """The advice: a mechanism, its numbers, why, and what isolation that buys."""

    needs: TenantNeeds
    gpu: GpuFacts
    mechanism: Mechanism
    rule: str  # the decision rule that fired (see RULES)
    workloads_per_gpu: int
    gpus_per_workload: int
    resource_name: str
    reasons: tuple[str, ...]
    warnings: tuple[str, ...]
    mig: MigPlan | None = None
    mps: MpsPlan | None = None
    time_slicing_replicas: int | None = None

    @property
    def pods_per_workload(self) -> int:
        """A pod runs on one node: a workload that needs more GPUs than a node has runs as several pods."""
        return math.ceil(self.gpus_per_workload / self.needs.gpus_per_node)

    @property
    def gpus_per_pod(self) -> int:
        return math.ceil(self.gpus_per_workload / self.pods_per_workload)

    @property
    def isolation(self) -> IsolationProfile:
        return ISOLATION[self.mechanism]

    @property
    def overlay(self) -> str:
        return OVERLAY[self.mechanism]


# Every rule `recommend` can fire, in the order it tries them; docs/sharing-strategy.md tells the same story.
RULES: dict[str, str] = {
    "too-big-for-one-gpu": "the workload needs more memory than one GPU has: whole GPUs, several per workload",
    "one-per-gpu": "one workload per GPU: nothing to share, whole GPUs",
    "memory-fits-one": "only one workload fits in the GPU's memory: whole GPUs",
    "multi-tenant-mig": "tenants that do not trust each other share a GPU only through MIG",
    "multi-tenant-whole": "no MIG profile fits twice: tenants that do not trust each other get whole GPUs",
    "latency-mig": "latency-sensitive: MIG, whose slices a neighbour cannot take",
    "latency-mps": "latency-sensitive without MIG: MPS, kernels run side by side under per-client caps",
    "batch-time-slicing": "trusted batch work: time-slicing, the simplest way to pack it",
}


def recommend(needs: TenantNeeds, gpu: GpuFacts) -> Recommendation:
    """Apply the rules in order; the first that fits decides."""
    want, total = needs.memory_mib, gpu.memory_mib
    if want > total:
        count = math.ceil(want / total)
        node = needs.gpus_per_node
        pods = math.ceil(count / node)
        too_big: tuple[str, ...] = (
            (
                f"{count} GPUs is more than one node has ({node}, --gpus-per-node) and a pod cannot span nodes: "
                f"run each workload as {pods} pods of {math.ceil(count / pods)} GPUs with a multi-node framework "
                "(PyTorch distributed, say), or use GPUs with more memory",
            )
            if count > node
            else ()
        )
        return _whole(
            needs,
            gpu,
            "too-big-for-one-gpu",
            (
                f"{needs.memory_gib:g} GiB does not fit in one {gpu.product_name} ({gpu.memory_gib:.1f} GiB); "
                f"each workload needs {count} GPUs and must split its model across them",
            ),
            gpus_per_workload=count,
            warnings=too_big,
        )
    if needs.per_gpu == 1:
        return _whole(needs, gpu, "one-per-gpu", ("one workload per GPU leaves nothing to share",))
    fit = total // want
    memory_note = f"{fit} x {needs.memory_gib:g} GiB fit in {gpu.memory_gib:.1f} GiB"
    if fit < 2:
        return _whole(
            needs,
            gpu,
            "memory-fits-one",
            (f"two workloads of {needs.memory_gib:g} GiB do not fit in {gpu.memory_gib:.1f} GiB",),
            warnings=(f"asked for {needs.per_gpu} per GPU; only 1 fits in memory",),
        )
    mig, mig_note = plan_mig(needs, gpu)
    if needs.tenancy == "multi-tenant":
        if mig is not None:
            return _mig(needs, gpu, "multi-tenant-mig", mig, mig_note)
        return _whole(
            needs,
            gpu,
            "multi-tenant-whole",
            (mig_note, "MPS and time-slicing give no fault isolation between tenants"),
        )
    if needs.latency == "sensitive":
        if mig is not None:
            return _mig(needs, gpu, "latency-mig", mig, mig_note)
        return _mps(needs, gpu, fit, mig_note, memory_note)
    replicas = min(needs.per_gpu, fit)
    warnings = _fewer_than_asked(needs.per_gpu, replicas, memory_note)
    return Recommendation(
        needs=needs,
        gpu=gpu,
        mechanism="time-slicing",
        rule="batch-time-slicing",
        workloads_per_gpu=replicas,
        gpus_per_workload=1,
        resource_name=SHARED_RESOURCE,
        reasons=(
            "batch work from one trusted tenant needs throughput, not isolation",
            "time-slicing needs no daemon and lets one job use the whole GPU while the others idle",
            f"{replicas} replicas per GPU: {memory_note}, so the replicas fit if each keeps to its size",
        ),
        warnings=warnings,
        time_slicing_replicas=replicas,
    )


def plan_mig(needs: TenantNeeds, gpu: GpuFacts) -> tuple[MigPlan | None, str]:
    """The smallest MIG profile with enough memory, if at least two of it fit on one GPU; else why not."""
    catalogue, want = gpu.mig_catalogue, needs.memory_mib
    if catalogue is None:
        return None, f"the {gpu.product_name} has no MIG"
    candidates = sorted(
        (p for p in catalogue.profiles if not p.media_extension and _profile_mib(gpu.memory_mib, catalogue, p) >= want),
        key=lambda p: (p.memory_slices, p.sm_slices, p.name),
    )
    if not candidates:
        return None, f"no MIG profile of the {catalogue.model_key} has {needs.memory_gib:g} GiB"
    profile = candidates[0]
    most = max_instances(catalogue, profile)
    if most < 2:
        return None, f"the smallest MIG profile with {needs.memory_gib:g} GiB, {profile.name}, fits only once per GPU"
    layout = (profile.name,) * min(needs.per_gpu, most)
    starts = tuple(assign_placements(catalogue, layout))
    plan = MigPlan(catalogue, profile, _profile_mib(gpu.memory_mib, catalogue, profile), most, layout, starts)
    note = (
        f"{profile.name} is the smallest profile with {needs.memory_gib:g} GiB "
        f"({plan.profile_memory_mib / 1024:.2f} GiB, {profile.sm_slices}/{catalogue.sm_slices} of the SMs); "
        f"{most} fit on one GPU"
    )
    return plan, note


def max_instances(catalogue: MigCatalogue, profile: MigProfile) -> int:
    """How many instances of one profile fit on one GPU, by the placement rule."""
    for count in range(profile.max_count, 0, -1):
        try:
            assign_placements(catalogue, [profile.name] * count)
        except InvalidMigLayout:
            continue
        return count
    return 0


def _profile_mib(gpu_memory_mib: int, catalogue: MigCatalogue, profile: MigProfile) -> int:
    # Same proportional rule the node spec uses for MIG instance memory.
    return gpu_memory_mib * profile.memory_slices // catalogue.memory_slices


def _mig(needs: TenantNeeds, gpu: GpuFacts, rule: str, plan: MigPlan, note: str) -> Recommendation:
    reasons = [note]
    if rule == "multi-tenant-mig":
        reasons.append("only MIG partitions memory, SMs and faults in hardware between tenants")
    else:
        reasons.append("MIG slices cannot be taken by a neighbour, so latency does not depend on what it runs")
    same_memory = [
        p.name
        for p in plan.catalogue.profiles
        if p.memory_slices == plan.profile.memory_slices
        and p.sm_slices > plan.profile.sm_slices
        and not p.media_extension
        and max_instances(plan.catalogue, p) >= len(plan.layout)
    ]
    if same_memory:
        reasons.append(f"{', '.join(same_memory)} has the same memory and more SMs and also fits {len(plan.layout)}")
    return Recommendation(
        needs=needs,
        gpu=gpu,
        mechanism="mig",
        rule=rule,
        workloads_per_gpu=len(plan.layout),
        gpus_per_workload=1,
        resource_name=f"nvidia.com/mig-{plan.profile.resource_suffix}",
        reasons=tuple(reasons),
        warnings=_fewer_than_asked(
            needs.per_gpu, len(plan.layout), f"at most {plan.max_per_gpu} x {plan.profile.name}"
        ),
        mig=plan,
    )


def _mps(needs: TenantNeeds, gpu: GpuFacts, fit: int, mig_note: str, memory_note: str) -> Recommendation:
    replicas = min(needs.per_gpu, fit, gpu.mps_max_clients)
    limits = [memory_note] if fit < needs.per_gpu else []
    if gpu.mps_max_clients < needs.per_gpu:
        limits.append(f"MPS allows {gpu.mps_max_clients} clients per GPU on compute capability {_cc(gpu)}")
    warnings = _fewer_than_asked(needs.per_gpu, replicas, "; ".join(limits))
    if gpu.compute_capability is None:
        warnings += ("compute capability unknown: assuming the 16-client MPS limit",)
    elif gpu.compute_capability.major < 7:
        warnings += ("before Volta, MPS clients share one GPU address space: no memory protection at all",)
    plan = MpsPlan(replicas, gpu.memory_mib // replicas, 100 // replicas)
    return Recommendation(
        needs=needs,
        gpu=gpu,
        mechanism="mps",
        rule="latency-mps",
        workloads_per_gpu=replicas,
        gpus_per_workload=1,
        resource_name=SHARED_RESOURCE,
        reasons=(
            mig_note,
            "MPS runs the tenant's kernels side by side instead of taking turns, which keeps latency down",
            f"each client is capped at {plan.pinned_memory_limit_mib} MiB and {plan.active_thread_percentage}% "
            "of the SMs",
        ),
        warnings=warnings,
        mps=plan,
    )


def _whole(
    needs: TenantNeeds,
    gpu: GpuFacts,
    rule: str,
    reasons: tuple[str, ...],
    *,
    gpus_per_workload: int = 1,
    warnings: tuple[str, ...] = (),
) -> Recommendation:
    return Recommendation(
        needs=needs,
        gpu=gpu,
        mechanism="whole",
        rule=rule,
        workloads_per_gpu=1,
        gpus_per_workload=gpus_per_workload,
        resource_name=WHOLE_RESOURCE,
        reasons=reasons,
        warnings=warnings,
    )


def _fewer_than_asked(asked: int, given: int, why: str) -> tuple[str, ...]:
    if given >= asked:
        return ()
    return (f"asked for {asked} per GPU; {given} fit ({why})",)


def _cc(gpu: GpuFacts) -> str:
    return str(gpu.compute_capability) if gpu.compute_capability is not None else "unknown"
