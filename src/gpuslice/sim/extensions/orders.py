"""The queue orders by name: the core's priority and FIFO orders, and DRF."""

from __future__ import annotations

from collections.abc import Callable

from gpuslice.sim.core.queue import FifoOrder, PriorityOrder, QueueOrder
from gpuslice.sim.extensions.drf import DrfOrder

ORDERS: dict[str, Callable[[], QueueOrder]] = {
    PriorityOrder.name: PriorityOrder,
    FifoOrder.name: FifoOrder,
    "drf": DrfOrder,
}
