"""Node specs several tests share."""

from __future__ import annotations


def h100_mig_spec(name: str) -> str:
    """Two H100s, each with MIG instances 1g.10gb, 1g.10gb and 3g.40gb (a node spec YAML for the fake backend)."""
    return f"""\
name: {name}
gpus:
  - model: NVIDIA H100 80GB HBM3
    count: 2
    memory_mib: 81559
    compute_capability: "9.0"
    mig: [1g.10gb, 1g.10gb, 3g.40gb]
"""
