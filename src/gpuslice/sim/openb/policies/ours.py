"""Our policy `fgd-cpu`: FGD plus the gradient of GPU capacity that the node's CPU can no longer feed.

FGD looks one task ahead, so a CPU-only pod sees "no fragment change" on a GPU-rich node as long as
every typical task still fits, and lands there by the tie rule; later that node runs out of CPU with
GPUs idle (about 90 GPUs at 100 % arrived on the default trace). We add the change of

    S_n = max(0, free GPU milli - free CPU milli / κ),

the GPU capacity of node n that its free CPU cannot serve at κ, the typical GPU tasks' CPU milli per
GPU milli. The score is ⌊100·σ((Δ F_n(M) + Δ S_n)/1000)⌋ with FGD's GPU choice and the §4 tie rule.
"""

from __future__ import annotations

import numpy as np

from gpuslice.sim.openb.frag import TaskArrays
from gpuslice.sim.openb.policies.base import PolicyContext
from gpuslice.sim.openb.policies.fgd import INFEASIBLE, FgdPolicy, FgdScorer, IntArray
from gpuslice.sim.openb.shapes import Shape
from gpuslice.sim.openb.state import ClusterState


def cpu_per_gpu_milli(tasks: TaskArrays) -> float:
    """κ: Σ w·CPU / Σ w·GPU milli over the typical tasks that request GPUs (0 when none does)."""
    gpu = tasks.num_gpu * tasks.gpu_milli
    demand = int((tasks.weight * gpu).sum())
    return float((tasks.weight * tasks.cpu)[gpu > 0].sum()) / demand if demand else 0.0


class CpuAwareFgdScorer(FgdScorer):
    def __init__(self, cluster: ClusterState, num_shapes: int) -> None:
        super().__init__(cluster, num_shapes)
        self.kappa = cpu_per_gpu_milli(cluster.states.tasks)

    def stranded(self, total: IntArray, cpu: IntArray) -> np.ndarray:
        """S: free GPU milli beyond what the free CPU can feed at κ."""
        if self.kappa <= 0:
            return np.zeros(len(total))
        return np.maximum(0.0, total - cpu / self.kappa)

    def slot_matrix(self, sids: IntArray, shape: Shape) -> IntArray:
        delta, valid = self.slot_deltas(sids, shape)
        st = self.states
        rows = st.rows(sids)
        total, cpu = rows[:, st.TOTAL], rows[:, st.CPU]
        relief = self.stranded(total, cpu) - self.stranded(total - shape.gpu_request, cpu - shape.cpu)
        delta = delta + np.rint(relief * self.total_weight).astype(np.int64)[:, None]
        return np.where(valid, np.searchsorted(self.thresholds, delta, side="right"), INFEASIBLE)


class CpuAwareFgdPolicy(FgdPolicy):
    name = "fgd-cpu"

    def __init__(self, context: PolicyContext) -> None:
        self.cluster = context.cluster
        self.scorer = CpuAwareFgdScorer(context.cluster, len(context.shapes))
