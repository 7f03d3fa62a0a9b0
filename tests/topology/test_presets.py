"""The built-in topologies match the reference facts (scheduling.md §9.2) and fit the discovery presets."""

from __future__ import annotations

from itertools import combinations

import pytest

from gpuslice.discovery import PRESETS, load_node_spec
from gpuslice.topology import (
    PRESET_NAMES,
    PcieLevel,
    UnknownPreset,
    preset_gpu_count,
    preset_topology,
    topology_from_spec,
)
from tests.topology.reference import make_gpus

DGX1_TWO = {(0, 3), (0, 4), (1, 2), (1, 5), (2, 3), (4, 7), (5, 6), (6, 7)}
DGX1_ONE = {(0, 1), (0, 2), (1, 3), (2, 6), (3, 7), (4, 5), (4, 6), (5, 7)}


def test_dgx1_hybrid_cube_mesh() -> None:
    dgx1 = preset_topology("dgx1-v100")
    for pair in combinations(range(8), 2):
        expected = 2 if pair in DGX1_TWO else 1 if pair in DGX1_ONE else 0
        assert dgx1.link(*pair).nvlinks == expected, pair
        assert not dgx1.link(*pair).nvswitch
    for gpu in range(8):  # six NVLink-2 links per V100
        assert sum(dgx1.link(gpu, other).nvlinks for other in range(8) if other != gpu) == 6


def test_dgx1_pcie_layout() -> None:
    dgx1 = preset_topology("dgx1-v100")
    assert dgx1.link(0, 1).pcie is PcieLevel.SINGLE
    assert dgx1.link(6, 7).pcie is PcieLevel.SINGLE
    assert dgx1.link(0, 2).pcie is PcieLevel.HOSTBRIDGE
    assert dgx1.link(5, 7).pcie is PcieLevel.HOSTBRIDGE
    assert dgx1.link(3, 4).pcie is PcieLevel.SYSTEM


@pytest.mark.parametrize(("name", "links"), [("dgx-a100", 12), ("dgx-h100", 18)])
def test_nvswitch_systems_link_every_pair_through_the_switch(name: str, links: int) -> None:
    topology = preset_topology(name)
    for pair in combinations(range(8), 2):
        link = topology.link(*pair)
        assert link.nvswitch and link.nvlinks == links
        same_socket = (pair[0] < 4) == (pair[1] < 4)
        assert (link.pcie is PcieLevel.SYSTEM) != same_socket


def test_pcie_2socket_layout_for_any_count() -> None:
    eight = preset_topology("pcie-2socket")
    assert eight.link(0, 1).pcie is PcieLevel.SINGLE
    assert eight.link(1, 2).pcie is PcieLevel.NODE
    assert eight.link(3, 4).pcie is PcieLevel.SYSTEM
    sixteen = preset_topology("pcie-2socket", 16)
    assert sixteen.gpus == tuple(range(16))
    assert sixteen.link(8, 9).pcie is PcieLevel.SINGLE
    assert sixteen.link(7, 8).pcie is PcieLevel.SYSTEM
    odd = preset_topology("pcie-2socket", 3)
    assert odd.link(0, 1).pcie is PcieLevel.SINGLE and odd.link(1, 2).pcie is PcieLevel.SYSTEM
    assert not any(link.nvlinked for link in sixteen.links.values())


def test_presets_follow_the_node_gpu_indices_and_uuids() -> None:
    gpus = make_gpus(8)
    topology = preset_topology("dgx-h100", gpus)
    assert topology.uuids == tuple(g.uuid for g in gpus)
    assert topology.resolve(gpus[5].uuid) == 5


def test_preset_errors() -> None:
    with pytest.raises(UnknownPreset, match="unknown topology preset 'dgx-9'"):
        preset_topology("dgx-9")
    with pytest.raises(UnknownPreset, match="dgx1-v100 describes 8 GPUs, the node has 4"):
        preset_topology("dgx1-v100", 4)
    with pytest.raises(UnknownPreset, match="at least one GPU"):
        preset_topology("pcie-2socket", [])
    assert preset_gpu_count("pcie-2socket") is None
    assert set(PRESET_NAMES) == {"dgx1-v100", "dgx-a100", "dgx-h100", "pcie-2socket"}


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_discovery_preset_has_a_topology(name: str) -> None:
    spec = load_node_spec(f"preset:{name}")
    topology = topology_from_spec(spec.topology, spec.node.gpus)
    assert topology.gpus == tuple(g.index for g in spec.node.gpus)
    if spec.topology is not None:
        assert spec.topology["preset"] in topology.source
