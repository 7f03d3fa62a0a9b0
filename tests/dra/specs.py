"""Node specs and configs the DRA tests share."""

from __future__ import annotations

from pathlib import Path

DYNAMIC_CONFIG = "version: v1\nflags:\n  migStrategy: dynamic\n"
MIXED_CONFIG = "version: v1\nflags:\n  migStrategy: mixed\n"
TIME_SLICING_CONFIG = """\
version: v1
sharing:
  timeSlicing:
    resources:
      - name: nvidia.com/gpu
        replicas: 2
"""


def one_h100_dynamic(name: str = "node-a") -> str:
    """One H100 in MIG mode with no instances: every placement is a partitionable device."""
    return f"""\
name: {name}
gpus:
  - model: NVIDIA H100 80GB HBM3
    count: 1
    memory_mib: 81559
    compute_capability: "9.0"
    mig: []
"""


def write(directory: Path, name: str, text: str) -> str:
    path = directory / name
    path.write_text(text)
    return str(path)
