"""Our policies: FGD plus the change of GPU capacity that the node's CPU can no longer feed.

FGD looks one task ahead, so a CPU-only pod sees "no fragment change" on a GPU-rich node as long as
every typical task still fits, and lands there by the tie rule; later that node runs out of CPU with
GPUs idle (about 90 GPUs at 100 % arrived on the default trace). We also count

    S_n = max(0, free GPU milli - free CPU milli / κ),

the GPU capacity of node n that its free CPU cannot serve at κ, the typical GPU tasks' CPU milli per
GPU milli. Both policies keep FGD's GPU choice and the §4 tie rule:

- `fgd-cpu`: ⌊100·σ((Δ F_n(M) - max(0, S_after - S_before))/1000)⌋, a penalty for stranding GPUs;
- `fgd-cpu-sym`: ⌊100·σ((Δ F_n(M) + S_before - S_after)/1000)⌋, which also rewards relieving it. That
  pulls low-CPU pods onto CPU-poor nodes (P100, small V100) and wins on CPU-heavy workloads, but
  spends scarce models that pinned pods need (gpuspec workloads), see docs/openb.md.
"""

from __future__ import annotations

import numpy as np

from gpuslice.fgd.frag import TaskArrays
from gpuslice.fgd.policies.base import PolicyContext
from gpuslice.fgd.policies.fgd import FgdPolicy, FgdScorer, IntArray
from gpuslice.fgd.shapes import Shape
from gpuslice.fgd.state import OpenbCluster


def cpu_per_gpu_milli(tasks: TaskArrays) -> float:
    """κ: Σ w·CPU / Σ w·GPU milli over the typical tasks that request GPUs (0 when none does)."""
    gpu = tasks.num_gpu * tasks.gpu_milli
    demand = int((tasks.weight * gpu).sum())
    return float((tasks.weight * tasks.cpu)[gpu > 0].sum()) / demand if demand else 0.0


class CpuAwareFgdScorer(FgdScorer):
    adjusts = True

    def __init__(self, cluster: OpenbCluster, num_shapes: int, reward_relief: bool) -> None:
        super().__init__(cluster, num_shapes)
        self.kappa = cpu_per_gpu_milli(cluster.states.tasks)
        self.reward_relief = reward_relief

    def stranded(self, total: IntArray, cpu: IntArray) -> np.ndarray:
        """S: free GPU milli beyond what the free CPU can feed at κ."""
        if self.kappa <= 0:
            return np.zeros(len(total))
        return np.maximum(0.0, total - cpu / self.kappa)

    def adjustments(self, rows: IntArray, shape: Shape) -> IntArray:
        st = self.states
        total, cpu = rows[:, st.TOTAL], rows[:, st.CPU]
        relief = self.stranded(total, cpu) - self.stranded(total - shape.gpu_request, cpu - shape.cpu)
        if not self.reward_relief:
            relief = np.minimum(relief, 0.0)
        adjustment: IntArray = np.rint(relief * self.total_weight).astype(np.int64)
        return adjustment

    def adjustment(self, total: int, cpu: int, shape: Shape) -> int:
        """`adjustments` for one state, in Python floats (the same IEEE operations, so the same integer)."""
        if self.kappa <= 0:
            return 0
        before = max(0.0, total - cpu / self.kappa)
        after = max(0.0, (total - shape.gpu_request) - (cpu - shape.cpu) / self.kappa)
        relief = before - after
        if not self.reward_relief:
            relief = min(relief, 0.0)
        return round(relief * self.total_weight)


class CpuAwareFgdPolicy(FgdPolicy):
    """`fgd-cpu`: FGD minus the increase of stranded GPU capacity."""

    name = "fgd-cpu"
    reward_relief = False

    def make_scorer(self, context: PolicyContext) -> FgdScorer:
        return CpuAwareFgdScorer(context.cluster, len(context.shapes), self.reward_relief)


class SymmetricCpuAwareFgdPolicy(CpuAwareFgdPolicy):
    """`fgd-cpu-sym`: FGD plus the change of stranded GPU capacity, in both directions."""

    name = "fgd-cpu-sym"
    reward_relief = True
