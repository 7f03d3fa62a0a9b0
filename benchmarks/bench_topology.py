"""GetPreferredAllocation (whole GPUs) latency: the exact best-partition search on 8 and 16 GPUs."""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from itertools import combinations

from gpuslice.topology import PairLink, PcieLevel, Topology, clear_search_cache, preferred_whole_gpus, preset_topology

SIZES = (1, 2, 4, 8)


def _nvswitch16() -> Topology:
    # A DGX-2-like board: 16 GPUs on one NVSwitch fabric, two sockets of eight.
    links = {
        (a, b): PairLink(PcieLevel.NODE if (a < 8) == (b < 8) else PcieLevel.SYSTEM, 6, nvswitch=True)
        for a, b in combinations(range(16), 2)
    }
    return Topology(tuple(range(16)), links, source="nvswitch-16")


def _random16(seed: int = 1) -> Topology:
    # No structure at all: random PCIe levels and NVLink counts, the hardest case for any pruning.
    rng = random.Random(seed)
    links = {
        pair: PairLink(rng.choice(list(PcieLevel)), rng.choice([0, 0, 1, 2, 4])) for pair in combinations(range(16), 2)
    }
    return Topology(tuple(range(16)), links, source="random-16")


TOPOLOGIES: list[tuple[str, Callable[[], Topology]]] = [
    ("dgx1-v100 (8)", lambda: preset_topology("dgx1-v100")),
    ("dgx-h100 (8)", lambda: preset_topology("dgx-h100")),
    ("pcie-2socket (16)", lambda: preset_topology("pcie-2socket", 16)),
    ("nvswitch (16)", _nvswitch16),
    ("random links (16)", _random16),
]


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def _measure(topology: Topology, requests: list[tuple[list[int], list[int], int]]) -> list[float]:
    """Milliseconds per call, one sample per request."""
    samples = []
    for available, must_include, size in requests:
        started = time.perf_counter()
        preferred_whole_gpus(topology, available, must_include, size)
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def _row(name: str, topology: Topology, size: int, rng: random.Random) -> str:
    gpus = list(topology.gpus)
    repeats = 300 if len(gpus) <= 8 else 100
    clear_search_cache()
    cold = _measure(topology, [(gpus, [], size)])[0]
    full = _measure(topology, [(gpus, [], size)] * repeats)
    subsets = [rng.sample(gpus, rng.randint(size, len(gpus))) for _ in range(repeats)]
    mixed = _measure(topology, [(s, rng.sample(s, rng.randint(0, min(2, size))), size) for s in subsets])
    return (
        f"{name:<20}{size:>5}{cold:>9.2f}{statistics.median(full):>10.3f}{_percentile(full, 0.99):>10.3f}"
        f"{statistics.median(mixed):>10.3f}{_percentile(mixed, 0.99):>10.3f}"
    )


def main() -> None:
    rng = random.Random(42)
    print("preferred_whole_gpus latency in ms. all = every GPU available (the worst case); rnd = random available")
    print("subsets and 0-2 must-include GPUs (its p99 includes first calls for new GPU counts, see cold);")
    print("cold = the first call, which builds and caches the search graph for that GPU count and size.")
    print(f"{'topology':<20}{'size':>5}{'cold':>9}{'all p50':>10}{'all p99':>10}{'rnd p50':>10}{'rnd p99':>10}")
    for name, build in TOPOLOGIES:
        topology = build()
        for size in SIZES:
            print(_row(name, topology, size, rng), flush=True)


if __name__ == "__main__":
    main()
