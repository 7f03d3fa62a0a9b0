"""Built-in topologies of well-known systems (DGX-1 hybrid cube-mesh, DGX and HGX NVSwitch boards, PCIe servers)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import combinations

from gpuslice.gpu import Gpu
from gpuslice.topology.model import PairLink, PcieLevel, Topology

Links = dict[tuple[int, int], PairLink]

# DGX-1 (V100) hybrid cube-mesh: two fully connected quads plus cross links, some edges doubled.
_DGX1_DOUBLE = [(0, 3), (0, 4), (1, 2), (1, 5), (2, 3), (4, 7), (5, 6), (6, 7)]
_DGX1_SINGLE = [(0, 1), (0, 2), (1, 3), (2, 6), (3, 7), (4, 5), (4, 6), (5, 7)]


def _halves_pcie(count: int, near: PcieLevel, same_half: PcieLevel) -> dict[tuple[int, int], PcieLevel]:
    """PCIe levels of an 8-GPU board: pairs {0,1},{2,3},... at `near`, same half at `same_half`, else SYSTEM."""
    half = count // 2
    levels = {}
    for a, b in combinations(range(count), 2):
        if a // 2 == b // 2:
            levels[(a, b)] = near
        elif (a < half) == (b < half):
            levels[(a, b)] = same_half
        else:
            levels[(a, b)] = PcieLevel.SYSTEM
    return levels


def _dgx1_v100(count: int) -> Links:
    # NVIDIA's tests: single-switch pairs, the rest of a half shares a host bridge, halves are cross-CPU.
    nvlinks = dict.fromkeys(_DGX1_DOUBLE, 2) | dict.fromkeys(_DGX1_SINGLE, 1)
    levels = _halves_pcie(count, PcieLevel.SINGLE, PcieLevel.HOSTBRIDGE)
    return {pair: PairLink(level, nvlinks.get(pair, 0)) for pair, level in levels.items()}


def _dgx_a100(count: int) -> Links:
    # 12 NVLink-3 links per GPU into NVSwitches; two GPUs share a PCIe switch tree (modelled as PXB).
    levels = _halves_pcie(count, PcieLevel.MULTIPLE, PcieLevel.NODE)
    return {pair: PairLink(level, 12, nvswitch=True) for pair, level in levels.items()}


def _dgx_h100(count: int) -> Links:
    # 18 NVLink-4 links per GPU into NVSwitches (`topo -m` shows NV18); GPUs 0-3 and 4-7 on different sockets.
    levels = _halves_pcie(count, PcieLevel.NODE, PcieLevel.NODE)
    return {pair: PairLink(level, 18, nvswitch=True) for pair, level in levels.items()}


def _pcie_2socket(count: int) -> Links:
    # First half of the GPUs on socket 0, the rest on socket 1; consecutive GPUs share a PCIe switch.
    first_half = (count + 1) // 2
    links = {}
    for a, b in combinations(range(count), 2):
        socket_a, socket_b = a >= first_half, b >= first_half
        base_a, base_b = (first_half if socket_a else 0), (first_half if socket_b else 0)
        if socket_a != socket_b:
            level = PcieLevel.SYSTEM
        elif (a - base_a) // 2 == (b - base_b) // 2:
            level = PcieLevel.SINGLE
        else:
            level = PcieLevel.NODE
        links[(a, b)] = PairLink(level)
    return links


# name -> (GPU count it describes, or None for any count; builder over positions 0..count-1)
_PRESETS: dict[str, tuple[int | None, Callable[[int], Links]]] = {
    "dgx1-v100": (8, _dgx1_v100),
    "dgx-a100": (8, _dgx_a100),
    "dgx-h100": (8, _dgx_h100),
    "pcie-2socket": (None, _pcie_2socket),
}
PRESET_NAMES: tuple[str, ...] = tuple(_PRESETS)
_DEFAULT_COUNT = 8


class UnknownPreset(ValueError):
    """A topology preset name that gpuslice does not know, or a GPU count the preset cannot describe."""


def preset_gpu_count(name: str) -> int | None:
    """How many GPUs the preset describes (None: any count)."""
    if name not in _PRESETS:
        raise UnknownPreset(f"unknown topology preset {name!r} (known: {', '.join(PRESET_NAMES)})")
    return _PRESETS[name][0]


def preset_topology(name: str, gpus: Sequence[Gpu] | int | None = None) -> Topology:
    """The preset applied to `gpus` in index order (or to GPU indices 0..n-1 for a count; None: its own size)."""
    fixed = preset_gpu_count(name)
    builder = _PRESETS[name][1]
    if gpus is None:
        gpus = fixed or _DEFAULT_COUNT
    indices = list(range(gpus)) if isinstance(gpus, int) else sorted(g.index for g in gpus)
    uuids = () if isinstance(gpus, int) else tuple(g.uuid for g in sorted(gpus, key=lambda g: g.index))
    if fixed is not None and len(indices) != fixed:
        raise UnknownPreset(f"{name} describes {fixed} GPUs, the node has {len(indices)}")
    if not indices:
        raise UnknownPreset(f"{name} needs at least one GPU")
    by_position = builder(len(indices))
    links = {(indices[a], indices[b]): link for (a, b), link in by_position.items()}
    return Topology(tuple(indices), links, uuids, source=f"preset:{name}")
