"""The node spec's `topology:` section: presets, a PCIe default, link entries, the NUMA fallback, errors."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from gpuslice.topology import PcieLevel, TopologySpecError, topology_from_spec
from tests.topology.reference import make_gpus


def test_absent_section_derives_levels_from_numa() -> None:
    topology = topology_from_spec(None, make_gpus(4, numa=[0, 0, 1, None]))
    assert topology.source == "numa"
    assert topology.link(0, 1).pcie is PcieLevel.NODE
    assert topology.link(1, 2).pcie is PcieLevel.SYSTEM
    assert topology.link(2, 3).pcie is PcieLevel.SYSTEM  # an unknown NUMA node only matches another unknown
    assert not any(link.nvlinked for link in topology.links.values())


def test_empty_section_and_unknown_numa_everywhere() -> None:
    topology = topology_from_spec({}, make_gpus(3))
    assert {link.pcie for link in topology.links.values()} == {PcieLevel.NODE}


def test_preset_section() -> None:
    topology = topology_from_spec({"preset": "dgx1-v100"}, make_gpus(8))
    assert topology.link(0, 3).nvlinks == 2
    assert topology.source == "spec (preset:dgx1-v100)"


def test_yaml_example_from_the_docs() -> None:
    section = yaml.safe_load(
        """
        pcie: phb
        links:
          - {gpus: [0, 1], link: nvlink, count: 2}
          - {gpus: [2, 3], link: nvlink}
          - {gpus: [0, 1], link: pix}
          - {gpus: [2, 3], link: SYS}
        """
    )
    topology = topology_from_spec(section, make_gpus(4))
    assert topology.link(0, 1).label == "NV2" and topology.link(0, 1).pcie is PcieLevel.SINGLE
    assert topology.pair_score(0, 1) == 250
    assert topology.link(2, 3).nvlinks == 1 and topology.link(2, 3).pcie is PcieLevel.SYSTEM
    assert topology.link(1, 2).pcie is PcieLevel.HOSTBRIDGE
    assert topology.nvlink_islands() == (frozenset({0, 1}), frozenset({2, 3}))


def test_group_entries_and_later_entries_override() -> None:
    section = {
        "links": [
            {"gpus": [0, 1, 2, 3], "link": "nvswitch", "count": 18},
            {"gpus": [0, 1, 2, 3], "link": "board"},
            {"gpus": [2, 3], "link": "nvlink", "count": 0},  # a broken link: no NVLink left between 2 and 3
        ]
    }
    topology = topology_from_spec(section, make_gpus(4))
    assert topology.link(0, 3).label == "NV18" and topology.link(0, 3).pcie is PcieLevel.INTERNAL
    assert topology.link(2, 3).label == "INT"
    assert topology.nvlink_islands() == (frozenset({0, 1, 2, 3}),)


def test_preset_refined_by_links() -> None:
    section = {"preset": "dgx1-v100", "links": [{"gpus": [0, 5], "link": "nvlink", "count": 1}]}
    topology = topology_from_spec(section, make_gpus(8))
    assert topology.pair_score(0, 5) == 110
    assert topology.pair_score(0, 3) == 230


def test_links_follow_gpu_indices_not_positions() -> None:
    gpus = make_gpus(4)[2:]  # GPUs 2 and 3 only
    topology = topology_from_spec({"links": [{"gpus": [2, 3], "link": "nvlink", "count": 4}]}, gpus)
    assert topology.gpus == (2, 3)
    assert topology.pair_score(2, 3) == 420


BAD: list[tuple[Any, int, str]] = [
    (["preset"], 4, "topology: must be a mapping"),
    ({"presets": "dgx-h100"}, 4, "topology.presets: unknown key"),
    ({"preset": "dgx-9"}, 8, "topology.preset: unknown preset 'dgx-9'"),
    ({"preset": "dgx-h100"}, 4, "topology.preset: dgx-h100 describes 8 GPUs, the node has 4"),
    ({"preset": "dgx-h100", "pcie": "node"}, 8, "topology.pcie: cannot be combined with preset"),
    ({"pcie": "pcie5"}, 4, "topology.pcie: unknown PCIe level 'pcie5'"),
    ({"links": {"gpus": [0, 1]}}, 4, "topology.links: must be a list"),
    ({"links": ["nvlink"]}, 4, "topology.links[0]: must be a mapping"),
    ({"links": [{"gpus": [0, 1], "link": "nvlink", "speed": 2}]}, 4, "topology.links[0].speed: unknown key"),
    ({"links": [{"gpus": [0], "link": "nvlink"}]}, 4, "topology.links[0].gpus: must be a list of at least two"),
    ({"links": [{"gpus": "0,1", "link": "nvlink"}]}, 4, "topology.links[0].gpus: must be a list"),
    (
        {"links": [{"gpus": [0, 1], "link": "pix"}, {"gpus": [0, 1], "link": "pix"}, {"gpus": [0, 9], "link": "pix"}]},
        4,
        "topology.links[2].gpus: GPU 9 does not exist (the node has GPUs 0-3)",
    ),
    ({"links": [{"gpus": [1, 1], "link": "pix"}]}, 4, "topology.links[0].gpus: GPU 1 is listed twice"),
    ({"links": [{"gpus": [0, True], "link": "pix"}]}, 4, "topology.links[0].gpus: GPU indices must be integers"),
    ({"links": [{"gpus": [0, 1]}]}, 4, "topology.links[0].link: required"),
    ({"links": [{"gpus": [0, 1], "link": "infiniband"}]}, 4, "topology.links[0].link: unknown PCIe level"),
    ({"links": [{"gpus": [0, 1], "link": "nvlink", "count": 19}]}, 4, "topology.links[0].count: must be an integer"),
    ({"links": [{"gpus": [0, 1], "link": "nvlink", "count": "2"}]}, 4, "topology.links[0].count: must be an integer"),
    ({"links": [{"gpus": [0, 1], "link": "pix", "count": 2}]}, 4, "topology.links[0].count: only nvlink and nvswitch"),
]


@pytest.mark.parametrize(("section", "count", "message"), BAD)
def test_bad_sections_name_the_key(section: Any, count: int, message: str) -> None:
    with pytest.raises(TopologySpecError) as caught:
        topology_from_spec(section, make_gpus(count))
    assert str(caught.value).startswith(message)
    assert isinstance(caught.value, ValueError)


def test_duplicate_gpu_indices_in_the_node() -> None:
    gpus = make_gpus(2)
    with pytest.raises(TopologySpecError, match="distinct"):
        topology_from_spec(None, [gpus[0], gpus[0]])
