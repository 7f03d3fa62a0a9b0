"""What each sharing mechanism isolates and what it does not: one table for `advise` and the docs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpuslice.sharing import Isolation as Guarantee

Mechanism = Literal["whole", "mig", "mps", "time-slicing"]
MECHANISMS: tuple[Mechanism, ...] = ("whole", "mig", "mps", "time-slicing")


@dataclass(frozen=True)
class IsolationProfile:
    """The isolation one mechanism gives, stated per axis, plus what it does not give."""

    guarantee: Guarantee  # the plugin's own classification (sharing.Isolation): the verdict and the label
    memory: str
    faults: str
    performance: str
    not_given: tuple[str, ...]

    @property
    def verdict(self) -> Literal["strong", "partial", "none"]:
        """The walkthrough's per-allocation verdict."""
        return self.guarantee.strength

    @property
    def label(self) -> str:
        """The node label value tenants select on (exclusive, mig, mps, none)."""
        return self.guarantee.value


ISOLATION: dict[Mechanism, IsolationProfile] = {
    "whole": IsolationProfile(
        guarantee=Guarantee.EXCLUSIVE,
        memory="all of the GPU's memory belongs to one workload",
        faults="a crash, an Xid or a GPU reset touches only this workload",
        performance="all SMs, L2 and memory bandwidth are yours; only PCIe/NVLink, host CPU and memory are shared",
        not_given=("no sharing: a workload that keeps the GPU 10% busy still holds all of it",),
    ),
    "mig": IsolationProfile(
        guarantee=Guarantee.MIG,
        memory="the instance's own memory slices: capacity, bandwidth and L2 are partitioned in hardware",
        faults="application faults stay inside the instance; Xid events name the instance, so only it turns unhealthy",
        performance="the instance's own SM slices: a busy neighbour cannot take your SMs or your memory bandwidth",
        not_given=(
            "only the catalogue's fixed sizes (on an H100: 1/7, 2/7, 3/7, 4/7 or 7/7 of the SMs), never an exact half",
            "changing the layout needs the GPU drained of work (MIG layouts do not survive a GPU reset)",
            "GPU-wide faults (double-bit ECC, fallen off the bus, a GPU reset) still take every instance down",
            "power and thermal limits are shared; no GPU-to-GPU peer-to-peer from inside an instance",
        ),
    ),
    "mps": IsolationProfile(
        guarantee=Guarantee.MPS,
        memory="each client has its own GPU address space (Volta and newer) and a pinned-memory limit caps its share",
        faults=(
            "none between clients: a fatal GPU fault in one client is raised in every client on that GPU, and the "
            "MPS server takes no new client there until they have all exited"
        ),
        performance="an active-thread percentage caps each client's SMs; kernels of different pods run concurrently",
        not_given=(
            "limits are caps, not reservations: L2 and memory bandwidth stay shared, so a neighbour still slows you",
            "one MPS control daemon per GPU is a shared point of failure for every pod on it",
            "every client of one MPS server must run as the same Linux user",
        ),
    ),
    "time-slicing": IsolationProfile(
        guarantee=Guarantee.NONE,
        memory="none: every replica sees all of the GPU's memory; one pod can take it all, the others then fail",
        faults=(
            "per process only: each pod has its own CUDA context, so an application fault ends only that process; "
            "a GPU-level fault ends them all"
        ),
        performance="none: contexts take turns on the whole GPU, so your latency depends on what the others run",
        not_given=(
            "no memory limit, no compute share, no priority: 4 replicas do not mean 25% each",
            "a request for 2 replicas may land on the same GPU and gain nothing",
        ),
    ),
}
