"""Pair links, NVIDIA's pair scores, GPU references and NVLink islands."""

from __future__ import annotations

import pytest

from gpuslice.topology import PairLink, PcieLevel, Topology, UnknownGpuError, preset_topology, uniform_links
from tests.topology.reference import make_gpus

SCORES = [
    (PairLink(PcieLevel.SYSTEM), 10, "SYS"),
    (PairLink(PcieLevel.NODE), 20, "NODE"),
    (PairLink(PcieLevel.HOSTBRIDGE), 30, "PHB"),
    (PairLink(PcieLevel.MULTIPLE), 40, "PXB"),
    (PairLink(PcieLevel.SINGLE), 50, "PIX"),
    (PairLink(PcieLevel.INTERNAL), 60, "INT"),
    (PairLink(PcieLevel.SINGLE, nvlinks=1), 150, "NV1"),
    (PairLink(PcieLevel.SYSTEM, nvlinks=2), 210, "NV2"),
    (PairLink(PcieLevel.HOSTBRIDGE, nvlinks=12), 1230, "NV12"),
    # Through an NVSwitch the remote end of each NVLink is the switch: only the PCIe level scores.
    (PairLink(PcieLevel.NODE, nvlinks=18, nvswitch=True), 20, "NV18"),
    (PairLink(PcieLevel.NODE, nvswitch=True), 20, "NVS"),
]


@pytest.mark.parametrize(("link", "score", "label"), SCORES)
def test_pair_score_and_label(link: PairLink, score: int, label: str) -> None:
    assert link.score == score
    assert link.label == label


def test_negative_nvlink_count_is_rejected() -> None:
    with pytest.raises(ValueError, match="nvlinks"):
        PairLink(PcieLevel.NODE, nvlinks=-1)


def test_topology_needs_every_pair() -> None:
    links = uniform_links([0, 1, 2], PairLink(PcieLevel.NODE))
    del links[(1, 2)]
    with pytest.raises(ValueError, match="GPU pair 1-2"):
        Topology((0, 1, 2), links)


def test_topology_rejects_unknown_pairs_and_unsorted_gpus() -> None:
    links = uniform_links([0, 1], PairLink(PcieLevel.NODE))
    with pytest.raises(ValueError, match="not an ascending pair"):
        Topology((0, 1), {**links, (1, 5): PairLink(PcieLevel.NODE)})
    with pytest.raises(ValueError, match="ascending"):
        Topology((1, 0), links)


def test_dgx1_worked_example_pair_scores() -> None:
    dgx1 = preset_topology("dgx1-v100")
    assert [dgx1.pair_score(*pair) for pair in [(0, 2), (4, 5), (0, 4), (2, 5), (0, 5), (2, 4)]] == [
        130,
        150,
        210,
        10,
        10,
        10,
    ]
    assert dgx1.pair_score(5, 4) == 150
    assert dgx1.pair_score(3, 3) == 0
    assert dgx1.set_score([0, 2, 4]) == 130 + 210 + 10


def test_link_lookup_errors() -> None:
    dgx1 = preset_topology("dgx1-v100")
    assert dgx1.link(7, 6) == dgx1.link(6, 7)
    with pytest.raises(ValueError, match="itself"):
        dgx1.link(1, 1)
    with pytest.raises(UnknownGpuError, match="GPU 9"):
        dgx1.link(1, 9)


def test_resolve_by_index_uuid_and_decimal_string() -> None:
    links = uniform_links([0, 1], PairLink(PcieLevel.NODE))
    topology = Topology((0, 1), links, ("GPU-a", "GPU-b"))
    assert [topology.resolve(ref) for ref in (0, 1, "GPU-b", "1")] == [0, 1, 1, 1]
    for bad in (2, "GPU-z", "7", True):
        with pytest.raises(UnknownGpuError):
            topology.resolve(bad)


@pytest.mark.parametrize(
    ("name", "islands"),
    [
        ("dgx1-v100", [set(range(8))]),
        ("dgx-a100", [set(range(8))]),
        ("dgx-h100", [set(range(8))]),
        ("pcie-2socket", [{i} for i in range(8)]),
    ],
)
def test_preset_islands(name: str, islands: list[set[int]]) -> None:
    topology = preset_topology(name)
    assert [set(island) for island in topology.nvlink_islands()] == islands
    assert topology.island_of(3) == frozenset(islands[0] if len(islands) == 1 else {3})


def test_islands_of_a_partial_mesh() -> None:
    links = uniform_links(range(5), PairLink(PcieLevel.SYSTEM))
    links[(0, 3)] = PairLink(PcieLevel.SYSTEM, nvlinks=4)
    links[(3, 4)] = PairLink(PcieLevel.SYSTEM, nvlinks=1)
    topology = Topology((0, 1, 2, 3, 4), links)
    assert topology.nvlink_islands() == (frozenset({0, 3, 4}), frozenset({1}), frozenset({2}))
    with pytest.raises(UnknownGpuError):
        topology.island_of(9)


def test_matrix_reads_like_nvidia_smi() -> None:
    lines = preset_topology("dgx1-v100").matrix().splitlines()
    assert lines[0].split() == [f"GPU{i}" for i in range(8)]
    assert lines[1].split() == ["GPU0", "X", "NV1", "NV1", "NV2", "NV2", "SYS", "SYS", "SYS"]


def test_from_gpus_takes_indices_and_uuids() -> None:
    gpus = make_gpus(3)[::-1]
    topology = Topology.from_gpus(gpus, uniform_links([0, 1, 2], PairLink(PcieLevel.SINGLE)), "nvml")
    assert topology.gpus == (0, 1, 2)
    assert topology.resolve("GPU-test-02") == 2
    assert topology.source == "nvml"
