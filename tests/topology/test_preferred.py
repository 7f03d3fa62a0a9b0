"""GetPreferredAllocation for whole GPUs: NVIDIA's best-effort partition rule on every preset."""

from __future__ import annotations

import random
from itertools import combinations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuslice.topology import (
    PRESET_NAMES,
    PairLink,
    PcieLevel,
    Topology,
    UnknownGpuError,
    preferred_whole_gpus,
    preset_topology,
    topology_from_spec,
)
from tests.topology.reference import exhaustive_preferred, make_gpus

ALL = list(range(8))

# (preset, available, must_include, size, expected); reasoning for the less obvious rows in docs/topology.md.
CASES = [
    # The reference example: the greedy best pair would be {0,4} (210); the best partition {0,2}+{4,5} wins.
    ("dgx1-v100", [0, 2, 4, 5], [], 2, [4, 5]),
    ("dgx1-v100", [5, 4, 2, 0], [], 2, [4, 5]),
    ("dgx1-v100", ALL, [], 4, [0, 1, 2, 3]),
    ("dgx1-v100", ALL, [], 2, [0, 3]),
    ("dgx1-v100", ALL, [5], 2, [5, 6]),
    ("dgx1-v100", ALL, [], 8, ALL),
    # Five GPUs in pairs: {0,3}+{1,2}+{4,pad} and {0,4}+{1,pad}+{2,3} tie at 460; the first enumerated wins,
    # and inside it {0,3} and {1,2} tie at 230: the first set wins.
    ("dgx1-v100", [0, 1, 2, 3, 4], [], 2, [0, 3]),
    ("dgx1-v100", [0, 1, 2, 3, 4], [4], 2, [0, 4]),
    ("dgx1-v100", [3, 1, 2], [], 1, [1]),
    ("dgx1-v100", [3, 1, 2], [2], 1, [2]),
    ("dgx-h100", [0, 4, 5, 6], [], 2, [5, 6]),
    ("dgx-h100", ALL, [], 4, [0, 1, 2, 3]),
    ("dgx-h100", ALL, [4], 2, [4, 5]),
    ("dgx-h100", ALL, [3, 4], 2, [3, 4]),
    ("dgx-a100", [1, 2, 3, 4, 6], [], 2, [2, 3]),
    ("dgx-a100", ALL, [6], 4, [4, 5, 6, 7]),
    ("pcie-2socket", [0, 2, 3, 5], [], 2, [2, 3]),
    ("pcie-2socket", ALL, [], 4, [0, 1, 2, 3]),
    ("pcie-2socket", ALL, [0, 4], 2, [0, 4]),
    ("pcie-2socket", [1, 2, 5, 6, 7], [], 3, [5, 6, 7]),
]


@pytest.mark.parametrize(("preset", "available", "must_include", "size", "expected"), CASES)
def test_best_effort_rule_on_presets(
    preset: str, available: list[int], must_include: list[int], size: int, expected: list[int]
) -> None:
    topology = preset_topology(preset)
    assert preferred_whole_gpus(topology, available, must_include, size) == expected
    assert exhaustive_preferred(topology, available, must_include, size) == expected


INVALID = [
    ([0, 1, 2], [], 0),
    ([0, 1, 2], [], -1),
    ([0, 1], [], 3),
    ([0, 0, 1], [], 3),  # duplicates count once
    ([0, 1, 2], [0, 1, 2], 2),
    ([0, 1, 2], [5], 2),  # a must-include GPU that is not available
    ([0, 1, 2], [5], 1),
]


@pytest.mark.parametrize(("available", "must_include", "size"), INVALID)
@pytest.mark.parametrize("preset", PRESET_NAMES)
def test_invalid_arguments_give_an_empty_list(
    preset: str, available: list[int], must_include: list[int], size: int
) -> None:
    assert preferred_whole_gpus(preset_topology(preset), available, must_include, size) == []


def test_answers_in_the_callers_references() -> None:
    gpus = make_gpus(8)
    topology = preset_topology("dgx1-v100", gpus)
    uuids = [gpus[i].uuid for i in (5, 0, 4, 2)]
    assert preferred_whole_gpus(topology, uuids, [], 2) == [gpus[4].uuid, gpus[5].uuid]
    assert preferred_whole_gpus(topology, ["0", "2", "4", "5"], ["2"], 2) == ["0", "2"]
    # The same GPU named twice (UUID and index) counts once.
    assert preferred_whole_gpus(topology, [gpus[0].uuid, "0", "2"], [], 3) == []


def test_unknown_references_raise() -> None:
    topology = preset_topology("dgx-h100")
    with pytest.raises(UnknownGpuError, match="GPU-nope"):
        preferred_whole_gpus(topology, [0, 1, "GPU-nope"], [], 2)
    with pytest.raises(UnknownGpuError, match="9"):
        preferred_whole_gpus(topology, [0, 1], [9], 2)


def test_sixteen_gpus() -> None:
    topology = preset_topology("pcie-2socket", 16)
    everything = list(range(16))
    assert preferred_whole_gpus(topology, everything, [], 8) == list(range(8))
    assert preferred_whole_gpus(topology, everything, [], 2) == [0, 1]
    assert preferred_whole_gpus(topology, everything, [9], 4) == [8, 9, 10, 11]
    assert preferred_whole_gpus(topology, everything, [3, 12], 4) == [2, 3, 12, 13]


def test_beyond_sixteen_gpus_a_greedy_answer_still_honours_the_contract() -> None:
    topology = preset_topology("pcie-2socket", 20)
    answer = preferred_whole_gpus(topology, list(range(20)), [], 4)
    assert answer == [0, 1, 2, 3]
    answer = preferred_whole_gpus(topology, list(range(20)), [17], 3)
    assert len(answer) == 3 and 17 in answer and answer == sorted(answer)


def _random_topology(rng: random.Random, count: int) -> Topology:
    levels = list(PcieLevel)
    links = {
        pair: PairLink(rng.choice(levels), rng.choice([0, 0, 0, 1, 2]), nvswitch=rng.random() < 0.1)
        for pair in combinations(range(count), 2)
    }
    return Topology(tuple(range(count)), links)


def test_random_topologies_match_the_exhaustive_rule() -> None:
    rng = random.Random(7)
    for _ in range(300):
        count = rng.randint(1, 8)
        topology = _random_topology(rng, count)
        available = rng.sample(range(count), rng.randint(1, count))
        size = rng.randint(0, len(available) + 1)
        must_include = rng.sample(available, rng.randint(0, min(size, len(available)) if size > 0 else 0))
        expected = exhaustive_preferred(topology, available, must_include, size)
        assert preferred_whole_gpus(topology, available, must_include, size) == expected


@st.composite
def requests(draw: st.DrawFn) -> tuple[Topology, list[int], list[int], int]:
    preset = draw(st.sampled_from(PRESET_NAMES))
    count = 8 if preset != "pcie-2socket" else draw(st.integers(1, 16))
    topology = preset_topology(preset, count)
    available = draw(st.lists(st.integers(0, count - 1), min_size=1, unique=True))
    size = draw(st.integers(1, len(available)))
    must_include = draw(st.lists(st.sampled_from(available), max_size=size, unique=True))
    return topology, available, must_include, size


@settings(max_examples=200, deadline=None)
@given(requests())
def test_property_answer_is_a_valid_allocation(request: tuple[Topology, list[int], list[int], int]) -> None:
    topology, available, must_include, size = request
    answer = preferred_whole_gpus(topology, available, must_include, size)
    assert len(answer) == size
    assert len(set(answer)) == size
    assert set(must_include) <= set(answer) <= set(available)


def test_spec_topology_drives_the_answer() -> None:
    # Without a topology section only NUMA matters: the two GPUs on the same node are preferred.
    topology = topology_from_spec(None, make_gpus(4, numa=[0, 1, 1, 0]))
    assert preferred_whole_gpus(topology, [0, 1, 2, 3], [0], 2) == [0, 3]
