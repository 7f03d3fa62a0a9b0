"""The shared event loop: time order, insertion order at equal times, one after-batch call per time."""

from __future__ import annotations

from typing import Any

import pytest

from gpuslice.sim.core.loop import EventLoop


@pytest.mark.parametrize(
    ("pushed", "batches"),
    [
        ([(5.0, "a"), (1.0, "b"), (3.0, "c")], [[(1.0, "b")], [(3.0, "c")], [(5.0, "a")]]),
        ([(2.0, "x"), (2.0, "y"), (2.0, "z")], [[(2.0, "x"), (2.0, "y"), (2.0, "z")]]),  # pushed order kept
        ([(0.0, "late"), (0.0, "early")], [[(0.0, "late"), (0.0, "early")]]),
        ([], []),
    ],
)
def test_events_apply_in_time_then_insertion_order_one_batch_per_time(
    pushed: list[tuple[float, str]], batches: list[list[tuple[float, str]]]
) -> None:
    loop = EventLoop()
    for at, name in pushed:
        loop.push(at, 0, name)
    seen: list[list[tuple[float, str]]] = []
    current: list[tuple[float, str]] = []

    def apply(kind: int, payload: Any) -> None:
        current.append((loop.now, payload))

    def after_batch() -> None:
        seen.append(list(current))
        current.clear()

    loop.run(apply, after_batch)
    assert seen == batches
    assert len(loop) == 0


def test_an_event_pushed_for_now_joins_the_current_batch_and_later_ones_wait() -> None:
    loop = EventLoop()
    loop.push(1.0, 0, "first")
    order: list[tuple[float, str]] = []
    batches = 0

    def apply(kind: int, payload: Any) -> None:
        order.append((loop.now, payload))
        if payload == "first":
            loop.push(loop.now, 0, "same time")
            loop.push(loop.now + 1, 0, "next time")

    def after_batch() -> None:
        nonlocal batches
        batches += 1

    loop.run(apply, after_batch)
    assert order == [(1.0, "first"), (1.0, "same time"), (2.0, "next time")]
    assert batches == 2
