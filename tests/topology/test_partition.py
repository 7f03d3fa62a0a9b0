"""The fast partition search returns exactly what exhaustive enumeration in go-gpuallocator's order returns."""

from __future__ import annotations

import random
from itertools import combinations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuslice.topology import MAX_PARTITION_ITEMS, best_partition
from tests.topology.reference import exhaustive_partition

# Few distinct weights make many ties, which is where enumeration order matters.
WEIGHT_CHOICES = [[10, 20], [10, 20, 30, 50], [10, 110, 210], list(range(301))]


def _random_weights(rng: random.Random, count: int) -> list[list[int]]:
    choices = rng.choice(WEIGHT_CHOICES)
    weights = [[0] * count for _ in range(count)]
    for a, b in combinations(range(count), 2):
        weights[a][b] = weights[b][a] = rng.choice(choices)
    return weights


def _check(weights: list[list[int]], size: int, required: list[int]) -> None:
    expected = exhaustive_partition(weights, size, required)
    found = best_partition(weights, size, required)
    if expected is None:
        assert found is None
        return
    assert found is not None
    sets, score = expected
    count = len(weights)
    # Padding slots are anonymous (None) in the reference and numbered count, count+1, ... by the search.
    assert [tuple(p for p in s if p < count) for s in found.sets] == [
        tuple(p for p in s if p is not None) for s in sets
    ]
    assert [len(s) for s in found.sets] == [size] * len(sets)
    assert found.score == score


def test_seeded_random_instances_match_exhaustive_enumeration() -> None:
    rng = random.Random(20240607)
    for _ in range(600):
        count = rng.randint(1, 9)
        size = rng.randint(1, count)
        required = rng.sample(range(count), rng.randint(0, size))
        _check(_random_weights(rng, count), size, required)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_property_matches_exhaustive_enumeration(data: st.DataObject) -> None:
    count = data.draw(st.integers(2, 8), label="count")
    size = data.draw(st.integers(2, count), label="size")
    values = data.draw(st.lists(st.sampled_from([10, 20, 110, 130, 210]), min_size=count * count, max_size=count**2))
    weights = [[0] * count for _ in range(count)]
    for a, b in combinations(range(count), 2):
        weights[a][b] = weights[b][a] = values[a * count + b]
    required = data.draw(st.lists(st.integers(0, count - 1), max_size=size, unique=True), label="required")
    _check(weights, size, required)


def test_padding_sits_in_one_set() -> None:
    found = best_partition([[0, 5, 1], [5, 0, 1], [1, 1, 0]], 2)
    assert found is not None
    assert found.padding == frozenset({3})
    assert found.sets == ((0, 1), (2, 3))
    assert found.score == 5


def test_required_positions_that_cannot_share_a_padding_free_set() -> None:
    # Three items in sets of two: the required pair must be a full set; it always can be.
    found = best_partition([[0, 1, 9], [1, 0, 9], [9, 9, 0]], 2, [0, 1])
    assert found is not None and found.sets[0] == (0, 1)


@pytest.mark.parametrize(
    ("count", "size", "required", "message"),
    [(4, 0, [], "between 1 and 4"), (4, 5, [], "between 1 and 4"), (4, 2, [4], "0..3"), (17, 2, [], "at most 16")],
)
def test_invalid_arguments(count: int, size: int, required: list[int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        best_partition([[0] * count for _ in range(count)], size, required)


def test_sixteen_items_stay_exact_on_structured_weights() -> None:
    # Two identical 8-item halves with strong pairs (0,1), (2,3), ... : the best pairing is obvious.
    count = MAX_PARTITION_ITEMS
    weights = [
        [0 if a == b else 50 if a // 2 == b // 2 else 20 if (a < 8) == (b < 8) else 10 for b in range(count)]
        for a in range(count)
    ]
    found = best_partition(weights, 2)
    assert found is not None
    assert found.sets == tuple((i, i + 1) for i in range(0, count, 2))
    assert found.score == 8 * 50
    by_four = best_partition(weights, 4, [5])
    assert by_four is not None and by_four.sets == ((0, 1, 2, 3), (4, 5, 6, 7), (8, 9, 10, 11), (12, 13, 14, 15))
