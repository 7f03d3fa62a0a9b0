"""Dominant Resource Fairness (Ghodsi et al., NSDI'11): progressive filling, shares, Jain's index, a queue order.

A tenant's dominant share is the largest of its shares of the cluster's CPU, memory and GPUs, divided
by its weight (weighted DRF; weight 1 is plain DRF). DRF serves the tenant with the lowest dominant
share next.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from gpuslice.sim.core.model import ClusterSpec, JobSpec
from gpuslice.sim.core.queue import AllocationView, SortKey, Unit
from gpuslice.units import MILLI


def dominant_share(usage: Sequence[float], capacity: Sequence[float], weight: float = 1.0) -> float:
    """max_j usage_j / capacity_j, divided by the weight; resources with no capacity are ignored."""
    if weight <= 0:
        raise ValueError(f"weight must be positive, got {weight}")
    shares = [used / total for used, total in zip(usage, capacity, strict=True) if total > 0]
    return max(shares, default=0.0) / weight


@dataclass(frozen=True)
class FillStep:
    """One row of the progressive-filling trace: who got a task, the shares after it, what is consumed."""

    user: str | None  # None: the stop row (nobody's next task fits)
    shares: dict[str, Fraction]
    consumed: tuple[Fraction, ...]


@dataclass(frozen=True)
class FillResult:
    tasks: dict[str, int]
    shares: dict[str, Fraction]
    consumed: tuple[Fraction, ...]
    steps: tuple[FillStep, ...]


def progressive_filling(
    capacity: Sequence[int | Fraction],
    demands: Mapping[str, Sequence[int | Fraction]],
    weights: Mapping[str, int | Fraction] | None = None,
    tie_break: Sequence[str] | None = None,
    work_conserving: bool = False,
    max_steps: int = 100_000,
) -> FillResult:
    """DRF by progressive filling with exact fractions: repeatedly give the user with the lowest (weighted)
    dominant share one more task. Ties go to the user listed first in `tie_break` (default: `demands` order).
    The paper's version stops at the first task that does not fit; `work_conserving` skips that user and
    continues with the others until nobody's task fits."""
    users = list(tie_break or demands)
    if sorted(users) != sorted(demands):
        raise ValueError(f"tie_break must list every user once: {users} vs {list(demands)}")
    totals = tuple(Fraction(value) for value in capacity)
    weight = {user: Fraction((weights or {}).get(user, 1)) for user in users}
    if any(w <= 0 for w in weight.values()):
        raise ValueError("weights must be positive")
    for user, demand in demands.items():
        if len(demand) != len(totals):
            raise ValueError(f"user {user!r}: demand has {len(demand)} resources, capacity has {len(totals)}")
        if all(Fraction(d) == 0 for d in demand):
            raise ValueError(f"user {user!r}: a task must demand something")
    consumed = [Fraction(0)] * len(totals)
    usage = {user: [Fraction(0)] * len(totals) for user in users}
    tasks = dict.fromkeys(users, 0)
    shares = dict.fromkeys(users, Fraction(0))
    steps: list[FillStep] = []
    blocked: set[str] = set()
    for _ in range(max_steps):
        candidates = [user for user in users if user not in blocked]
        if not candidates:
            break
        user = min(candidates, key=lambda u: (shares[u], users.index(u)))
        demand = [Fraction(d) for d in demands[user]]
        if any(c + d > total for c, d, total in zip(consumed, demand, totals, strict=True)):
            if not work_conserving:
                break
            blocked.add(user)
            continue
        consumed = [c + d for c, d in zip(consumed, demand, strict=True)]
        usage[user] = [u + d for u, d in zip(usage[user], demand, strict=True)]
        tasks[user] += 1
        shares[user] = max(u / total for u, total in zip(usage[user], totals, strict=True) if total > 0) / weight[user]
        steps.append(FillStep(user, dict(shares), tuple(consumed)))
    steps.append(FillStep(None, dict(shares), tuple(consumed)))
    return FillResult(tasks, shares, tuple(consumed), tuple(steps))


def jain_index(values: Sequence[float]) -> float:
    """Jain's fairness index (sum x)^2 / (n sum x^2): 1 when all equal, 1/n when one has everything.
    An empty list or all zeros counts as perfectly fair (1)."""
    total = sum(values)
    squares = sum(value * value for value in values)
    if not values or squares == 0:
        return 1.0
    return total * total / (len(values) * squares)


def largest_gap(values: Sequence[float]) -> float:
    """The largest difference between two values (0 for fewer than two)."""
    return max(values) - min(values) if len(values) > 1 else 0.0


def cluster_capacity(cluster: ClusterSpec) -> tuple[int, int, int]:
    """(milli-GPU, milli-CPU, memory MiB) of the whole cluster, in the units of Engine.tenant_usage."""
    return (
        cluster.total_gpus * MILLI,
        sum(node.cpu_milli for node in cluster.nodes),
        sum(node.memory_mib for node in cluster.nodes),
    )


class DrfOrder:
    """Queue order: the tenant with the lowest (weighted) dominant share first, then priority, then submission.

    Dynamic: the engine re-ranks bucket heads before every pick, so each placement moves its tenant back.
    Shares are of what each tenant holds bound now (the view's `tenant_usage`: GPU, CPU and memory).
    """

    dynamic = True

    def __init__(self, weights: Mapping[str, float] | None = None, name: str = "drf") -> None:
        self.name = name
        self.weights = dict(weights or {})
        if any(weight <= 0 for weight in self.weights.values()):
            raise ValueError(f"DRF weights must be positive, got {self.weights}")
        self.usage: Mapping[str, Sequence[int]] = {}
        self.capacity: tuple[int, ...] = ()

    def attach(self, view: AllocationView) -> None:
        self.usage = view.tenant_usage
        self.capacity = cluster_capacity(view.cluster)

    def share(self, tenant: str) -> float:
        usage = self.usage.get(tenant)
        if usage is None:
            return 0.0
        return dominant_share(usage, self.capacity, self.weights.get(tenant, 1.0))

    def key(self, unit: Unit) -> SortKey:
        return (-unit.job.priority, unit.job.submit, unit.pod_indices[0], unit.seq)

    def bucket(self, job: JobSpec) -> Hashable:
        return job.tenant

    def rank(self, unit: Unit) -> SortKey:
        return (self.share(unit.job.tenant), *self.key(unit))
