"""The FGD paper's workload-inflation protocol: seeded shuffle, clones to 1.3 x GPU capacity, node tie order."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpuslice.fgd.trace import PodTable
from gpuslice.units import MILLI

DEFAULT_RATIO = 1.3


@dataclass(frozen=True)
class ArrivalPlan:
    """What one seed fixes before the first placement.

    `order` lists pod-table indices in arrival order (a clone is just the index of the pod it copies);
    `node_prefix[i]` is the random `%04d-` prefix given to the i-th node by name, i.e. its rank in the
    tie order; `rng` continues the same stream (the Random policy draws from it).
    """

    seed: int
    ratio: float
    order: npt.NDArray[np.int64]
    clones: int
    removed: int
    node_prefix: npt.NDArray[np.int64]
    target_milli: float
    rng: np.random.Generator


def plan_arrivals(
    pods: PodTable, num_nodes: int, total_gpus: int, seed: int, ratio: float = DEFAULT_RATIO
) -> ArrivalPlan:
    """Steps 1-5 of the protocol (reference §3).

    1. seed the RNG; 3. shuffle the name-sorted pods; 5. inflate: draw pods uniformly with replacement and
    append clones while `total + drawn per-GPU milli <= ratio x capacity` (the reference code's stop test;
    the running total itself adds the full request), or remove uniformly random pods while the total is
    above the target; 4. then draw the node prefixes from the same stream.
    """
    rng = np.random.default_rng(seed)
    requests = pods.gpu_request.tolist()
    per_gpu = pods.gpu_milli.tolist()
    order: list[int] = rng.permutation(len(pods)).tolist()
    target = ratio * total_gpus * MILLI
    total = sum(requests)
    clones = removed = 0
    if ratio > 0 and total > target:
        while total > target and order:
            victim = order.pop(int(rng.integers(len(order))))
            total -= requests[victim]
            removed += 1
    elif ratio > 0 and total < target:
        while True:
            drawn = int(rng.integers(len(pods)))
            if total + per_gpu[drawn] > target:
                break
            order.append(drawn)
            total += requests[drawn]
            clones += 1
    node_prefix = rng.permutation(num_nodes).astype(np.int64)
    return ArrivalPlan(
        seed=seed,
        ratio=ratio,
        order=np.array(order, dtype=np.int64),
        clones=clones,
        removed=removed,
        node_prefix=node_prefix,
        target_milli=target,
        rng=rng,
    )
