"""Fairness between tenants over a run: dominant shares sampled after every pass, Jain's index and the largest gap.

A tenant is active from the submission of a job until that job ends; only moments with at least two
active tenants count (with one tenant there is nobody to be unfair to). At such a moment the tenants'
dominant shares (of CPU, memory and GPUs: what they hold bound) give Jain's index and the largest gap;
the run's figures are their time-weighted means over those moments.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

import numpy as np

from gpuslice.sim.core.engine import Engine, Listener
from gpuslice.sim.core.metrics import percentile
from gpuslice.sim.core.model import ClusterSpec
from gpuslice.sim.core.runs import JobRun, JobStatus
from gpuslice.sim.core.sections import ReportSection, number
from gpuslice.sim.extensions.drf import cluster_capacity, dominant_share, jain_index, largest_gap


class Fairness(Listener):
    """Samples dominant shares after every pass; extras: jain_index, max_share_gap and per-tenant figures."""

    def __init__(self, cluster: ClusterSpec, weights: Mapping[str, float] | None = None) -> None:
        self.capacity = cluster_capacity(cluster)
        self.weights = dict(weights or {})
        self.active: Counter[str] = Counter()
        self.last_time: float | None = None
        self.last: tuple[float, float, float, dict[str, float]] | None = None  # jain, weighted jain, gap, shares
        self.contended = 0.0
        self.sums = [0.0, 0.0, 0.0]
        self.share_time: dict[str, float] = {}
        self.worst_jain = 1.0

    def on_submit(self, engine: Engine, run: JobRun) -> None:
        if run.status is not JobStatus.REJECTED:
            self.active[run.spec.tenant] += 1

    def on_done(self, engine: Engine, run: JobRun) -> None:
        self.active[run.spec.tenant] -= 1

    def after_batch(self, engine: Engine) -> None:
        now = engine.now
        if self.last is not None and self.last_time is not None and now > self.last_time:
            span = now - self.last_time
            jain, jain_weighted, gap, shares = self.last
            self.contended += span
            self.sums[0] += span * jain
            self.sums[1] += span * jain_weighted
            self.sums[2] += span * gap
            for tenant, share in shares.items():
                self.share_time[tenant] = self.share_time.get(tenant, 0.0) + span * share
        tenants = sorted(tenant for tenant, count in self.active.items() if count > 0)
        self.last_time = now
        if len(tenants) < 2:
            self.last = None
            return
        usage = engine.tenant_usage
        shares = {tenant: dominant_share(usage.get(tenant, (0, 0, 0)), self.capacity) for tenant in tenants}
        weighted = [shares[t] / self.weights.get(t, 1.0) for t in tenants]
        jain = jain_index(list(shares.values()))
        self.worst_jain = min(self.worst_jain, jain)
        self.last = (jain, jain_index(weighted), largest_gap(list(shares.values())), shares)

    def extras(self, engine: Engine) -> dict[str, Any]:
        span = self.contended
        mean = [value / span if span else 1.0 for value in self.sums[:2]] + [self.sums[2] / span if span else 0.0]
        return {
            "jain_index": round(mean[0], 4),
            "jain_index_weighted": round(mean[1], 4),
            "jain_index_min": round(self.worst_jain, 4),
            "max_share_gap": round(mean[2], 4),
            "contended_hours": round(span / 3600, 3),
            "tenants": self.per_tenant(engine),
        }

    def per_tenant(self, engine: Engine) -> dict[str, dict[str, float]]:
        by_tenant: dict[str, list[JobRun]] = {}
        for run in engine.runs:
            by_tenant.setdefault(run.spec.tenant, []).append(run)
        table = {}
        span = self.contended
        for tenant in sorted(by_tenant):
            runs = by_tenant[tenant]
            waits = [run.wait for run in runs if run.wait is not None]
            table[tenant] = {
                "jobs": len(runs),
                "completed": sum(run.status is JobStatus.DONE for run in runs),
                "weight": self.weights.get(tenant, 1.0),
                "mean_dominant_share": round(self.share_time.get(tenant, 0.0) / span, 4) if span else 0.0,
                "wait_p50": round(percentile(waits, 50), 3),
                "wait_p99": round(percentile(waits, 99), 3),
                "wait_mean": round(float(np.mean(waits)) if waits else 0.0, 3),
            }
        return table


FAIRNESS_SECTION = ReportSection(
    "fairness between tenants (dominant shares while at least two tenants have work)",
    (
        ("Jain index", number("jain_index", fmt="{:.3f}")),
        ("Jain (weighted)", number("jain_index_weighted", fmt="{:.3f}")),
        ("largest gap", number("max_share_gap", fmt="{:.3f}")),
        ("GPU util", number("gpu_utilization", fmt="{:.1%}")),
    ),
    figure="tenants",
)
Fairness.section = FAIRNESS_SECTION
