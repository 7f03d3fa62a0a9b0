"""MIG capability device minors: /proc/driver/nvidia-caps/mig-minors, or its standard layout without it."""

from __future__ import annotations

import re
from dataclasses import field
from pathlib import Path

from gpuslice.records import record

# Under the driver root; the capability device of minor m is /dev/nvidia-caps/nvidia-cap<m> (MigInstance).
MIG_MINORS_FILE = "proc/driver/nvidia-caps/mig-minors"
# The layout when the file is absent: config=1, monitor=2, then per GPU minor
# 15 GIs x (1 GI access + 8 CI access) minors, in order.
_CAPS_PER_GI = 9
_CAPS_PER_GPU = 15 * _CAPS_PER_GI


@record
class MigMinors:
    """Capability device minors from /proc/driver/nvidia-caps/mig-minors (keys use the GPU's device minor)."""

    gi: dict[tuple[int, int], int] = field(default_factory=dict)
    ci: dict[tuple[int, int, int], int] = field(default_factory=dict)
    config: int | None = None
    monitor: int | None = None
    from_file: bool = True

    def gi_minor(self, gpu_minor: int, gi: int) -> int:
        if (gpu_minor, gi) in self.gi:
            return self.gi[(gpu_minor, gi)]
        return 3 + gpu_minor * _CAPS_PER_GPU + gi * _CAPS_PER_GI

    def ci_minor(self, gpu_minor: int, gi: int, ci: int) -> int:
        if (gpu_minor, gi, ci) in self.ci:
            return self.ci[(gpu_minor, gi, ci)]
        return 3 + gpu_minor * _CAPS_PER_GPU + gi * _CAPS_PER_GI + 1 + ci


def parse_mig_minors(text: str) -> MigMinors:
    """Parse lines 'config 1', 'monitor 2', 'gpu0/gi1/access 12', 'gpu0/gi1/ci0/access 13'."""
    minors = MigMinors()
    config = monitor = None
    for number, line in enumerate(text.splitlines(), start=1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 2 or not parts[1].isdigit():
            raise ValueError(f"mig-minors line {number}: expected '<name> <minor>', got {line!r}")
        name, minor = parts[0], int(parts[1])
        if name == "config":
            config = minor
        elif name == "monitor":
            monitor = minor
        elif match := re.fullmatch(r"gpu(\d+)/gi(\d+)/access", name):
            minors.gi[(int(match[1]), int(match[2]))] = minor
        elif match := re.fullmatch(r"gpu(\d+)/gi(\d+)/ci(\d+)/access", name):
            minors.ci[(int(match[1]), int(match[2]), int(match[3]))] = minor
        else:
            raise ValueError(f"mig-minors line {number}: unknown capability {name!r}")
    return MigMinors(minors.gi, minors.ci, config, monitor)


def load_mig_minors(root: Path) -> MigMinors:
    """mig-minors under `root`; the standard layout (from_file=False) when the file is absent."""
    path = root / MIG_MINORS_FILE
    try:
        return parse_mig_minors(path.read_text())
    except FileNotFoundError:
        return MigMinors(from_file=False)


# What the fake node spec and the recording MIG control number their capability devices by.
STANDARD_MIG_MINORS = MigMinors(from_file=False)
