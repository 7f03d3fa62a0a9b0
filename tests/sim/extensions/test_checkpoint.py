"""Checkpoint arithmetic: segment lengths, what a cut keeps and loses, the next safe point."""

from __future__ import annotations

import pytest

from gpuslice.sim.extensions.checkpoint import (
    Checkpointing,
    Cut,
    cut_segment,
    next_safe_point,
    saves_needed,
    segment_length,
)

EVERY_100 = Checkpointing(interval=100, save=10, restore=20)
NEVER = Checkpointing(interval=None, save=10, restore=20)


@pytest.mark.parametrize(
    ("work", "interval", "saves"),
    [(1000, 100, 9), (950, 100, 9), (100, 100, 0), (101, 100, 1), (50, 100, 0), (1000, None, 0), (0, 100, 0)],
)
def test_saves_needed_skips_a_save_after_the_last_piece(work: float, interval: float | None, saves: int) -> None:
    assert saves_needed(work, interval) == saves


@pytest.mark.parametrize(
    ("remaining", "resumed", "ckpt", "length"),
    [
        (1000, False, EVERY_100, 1000 + 9 * 10),
        (800, True, EVERY_100, 20 + 800 + 7 * 10),
        (1000, False, NEVER, 1000),
        (1000, True, NEVER, 1020),
    ],
)
def test_segment_length(remaining: float, resumed: bool, ckpt: Checkpointing, length: float) -> None:
    assert segment_length(remaining, resumed, ckpt) == length


@pytest.mark.parametrize(
    ("elapsed", "resumed", "ckpt", "cut"),
    [
        (50, False, EVERY_100, Cut(0, 50, False, 0)),  # before the first save: all lost
        (105, False, EVERY_100, Cut(0, 105, False, 0)),  # a save in flight is lost too
        (110, False, EVERY_100, Cut(100, 0, False, 1)),  # exactly at a completed save: nothing lost
        (250, False, EVERY_100, Cut(200, 30, False, 2)),
        (15, True, EVERY_100, Cut(0, 15, True, 0)),  # still restoring
        (20 + 250, True, EVERY_100, Cut(200, 30, False, 2)),  # the restore shifts the clock
        (500, False, NEVER, Cut(0, 500, False, 0)),
    ],
)
def test_cut_keeps_the_last_completed_save(elapsed: float, resumed: bool, ckpt: Checkpointing, cut: Cut) -> None:
    assert cut_segment(elapsed, 1000, resumed, ckpt) == cut


@pytest.mark.parametrize(
    ("elapsed", "remaining", "resumed", "ckpt", "safe"),
    [
        (250, 1000, False, EVERY_100, 330),
        (110, 1000, False, EVERY_100, 220),
        (10, 1000, True, EVERY_100, 10),  # restoring: a safe point already
        (950, 1000, False, EVERY_100, 990),  # the ninth and last save
        (995, 1000, False, EVERY_100, None),  # no save left before the end
        (5, 1000, False, NEVER, None),
    ],
)
def test_next_safe_point(
    elapsed: float, remaining: float, resumed: bool, ckpt: Checkpointing, safe: float | None
) -> None:
    assert next_safe_point(elapsed, remaining, resumed, ckpt) == safe


@pytest.mark.parametrize(("interval", "save", "restore"), [(0, 1, 1), (-5, 1, 1), (10, -1, 0), (10, 0, -1)])
def test_bad_checkpointing_is_refused(interval: float, save: float, restore: float) -> None:
    with pytest.raises(ValueError, match="must be"):
        Checkpointing(interval, save, restore)
