"""Dynamic MIG: geometry operations on an 8-GPU node, and a claim+release cycle with the checkpoint on disk."""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from pathlib import Path

from gpuslice.discovery import RecordingMigControl, parse_node_spec
from gpuslice.sharing.dynamic.checkpoint import MigCheckpoint
from gpuslice.sharing.dynamic.geometry import DynamicMigGeometry
from gpuslice.sharing.dynamic.plan import dynamic_resources
from gpuslice.sharing.dynamic.runtime import DynamicMig

H100 = {"model": "NVIDIA H100 80GB HBM3", "memory_mib": 81559, "compute_capability": "9.0"}
ROUNDS = 2000
CLAIMS = 200


def _median_us(samples: list[float]) -> float:
    return statistics.median(samples) * 1e6


def main() -> None:
    node = parse_node_spec({"name": "bench", "gpus": [{**H100, "count": 8, "mig": []}]}).node
    resources = dynamic_resources(node)
    geometry = DynamicMigGeometry(resources)
    one = next(r for r in resources if r.name == "nvidia.com/mig-1g.10gb")
    three = [d.id for d in next(r for r in resources if r.name == "nvidia.com/mig-3g.40gb").devices]
    print(f"node: 8 x H100 80GB, {sum(len(r.devices) for r in resources)} placements over {len(resources)} resources")
    for held in (0, 8):  # with one 3g.40gb on each GPU, every query has held slots to check
        if held:
            geometry.reserve(three[::2])
        samples = []
        for _ in range(ROUNDS):
            started = time.perf_counter()
            geometry.unavailable(one.name)
            samples.append(time.perf_counter() - started)
        print(f"unavailable({one.name}) with {held} held: median {_median_us(samples):.1f} us")
    geometry.release(three[::2])
    cycle = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        geometry.reserve([three[0]])
        geometry.release([three[0]])
        cycle.append(time.perf_counter() - started)
    print(f"reserve + release (no device, no disk): median {_median_us(cycle):.1f} us")
    directory = Path(tempfile.mkdtemp(prefix="gs-bench-"))
    try:
        dynamic = DynamicMig(geometry, RecordingMigControl(node), MigCheckpoint(directory / "ckpt", node.name))
        claims = []
        for _ in range(CLAIMS):
            started = time.perf_counter()
            dynamic.claim([three[1]])
            claims.append(time.perf_counter() - started)
            dynamic.free(geometry.holdings())
        print(
            f"claim (reserve, recorded create, checkpoint with fsync): median {_median_us(claims):.0f} us, "
            f"p99 {statistics.quantiles(claims, n=100)[98] * 1e6:.0f} us"
        )
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
