"""Checkpoint arithmetic: how long a run segment takes, and what is saved or lost when it is cut short.

A job needs `work` seconds of GPU progress. While it runs it saves a checkpoint after every `interval`
seconds of progress, and each save takes `save` seconds (no progress meanwhile). A segment that resumes
from a checkpoint first spends `restore` seconds loading it. So a segment that resumes at durable
progress P0 looks like this on its own clock (cross-island slowdowns stretch the whole segment):

    [restore (only if P0 > 0)] [interval work][save] [interval work][save] ... [last work, no save]

Cutting a segment (preemption) keeps the progress of its last completed save and throws away everything
since then: work done, a save in flight, and, if it is still restoring, the partial restore.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# Times come back through float arithmetic (start + slowdown x offset); a save that completes "at" the cut
# must count as completed, so comparisons allow this much slack (seconds).
TIME_EPSILON = 1e-6


@dataclass(frozen=True)
class Checkpointing:
    """How one job checkpoints. interval None: never (a preempted job starts over)."""

    interval: float | None = 1800.0
    save: float = 60.0
    restore: float = 120.0

    def __post_init__(self) -> None:
        if self.interval is not None and not self.interval > 0:
            raise ValueError(f"checkpoint interval must be positive or None, got {self.interval}")
        if self.save < 0 or self.restore < 0:
            raise ValueError(f"save and restore times must be >= 0, got {self.save}, {self.restore}")

    def label(self) -> str:
        return "none" if self.interval is None else f"{self.interval:g}"


NEVER = Checkpointing(interval=None)


def saves_needed(work: float, interval: float | None) -> int:
    """Checkpoints taken while doing `work` seconds of progress (none after the final piece)."""
    if interval is None or work <= 0:
        return 0
    return max(0, math.ceil(work / interval - 1e-9) - 1)


def segment_length(remaining: float, resumed: bool, ckpt: Checkpointing) -> float:
    """Wall time (before slowdown) of a segment that must make `remaining` seconds of progress."""
    restore = ckpt.restore if resumed else 0.0
    return restore + remaining + ckpt.save * saves_needed(remaining, ckpt.interval)


@dataclass(frozen=True)
class Cut:
    """What a segment achieved when cut after `elapsed` seconds of its own (un-slowed) clock."""

    durable: float  # progress made in this segment that a completed save protects
    lost: float  # seconds of the segment spent since that save: work, a partial save, or a partial restore
    restoring: bool  # cut while still loading the checkpoint
    saves: int  # saves completed in this segment


def cut_segment(elapsed: float, remaining: float, resumed: bool, ckpt: Checkpointing) -> Cut:
    """Progress kept and time lost when a segment of `remaining` progress is cut after `elapsed` seconds."""
    restore = ckpt.restore if resumed else 0.0
    if elapsed < restore - TIME_EPSILON:
        return Cut(0.0, max(elapsed, 0.0), True, 0)
    clock = elapsed - restore
    if ckpt.interval is None:
        return Cut(0.0, clock, False, 0)
    cycle = ckpt.interval + ckpt.save
    saves = min(int((clock + TIME_EPSILON) // cycle), saves_needed(remaining, ckpt.interval))
    durable = saves * ckpt.interval
    return Cut(durable, max(clock - saves * cycle, 0.0), False, saves)


def next_safe_point(elapsed: float, remaining: float, resumed: bool, ckpt: Checkpointing) -> float | None:
    """Segment-clock time of the next completed save after `elapsed`; None when the segment has no later save.

    A job still restoring is treated as being at a safe point already: cutting it loses only the restore.
    """
    restore = ckpt.restore if resumed else 0.0
    if elapsed < restore - TIME_EPSILON:
        return elapsed
    if ckpt.interval is None:
        return None
    cycle = ckpt.interval + ckpt.save
    done = int((elapsed - restore + TIME_EPSILON) // cycle)
    if done + 1 > saves_needed(remaining, ckpt.interval):
        return None
    return restore + (done + 1) * cycle
