"""Exact, fast search for go-gpuallocator's best partition (dynamic programming over remaining-GPU bitmasks)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from functools import lru_cache
from itertools import combinations
from typing import TYPE_CHECKING

from gpuslice.records import record

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

# numpy is imported by each search function, not here: the plugin imports this module at start-up (through
# allocation), and only a preferred-allocation query on a node with a topology runs the search.

# Above this many items the search graph grows past a few million edges; callers fall back to something cheaper.
MAX_PARTITION_ITEMS = 16


@record
class Partition:
    """A partition of positions 0..n-1 (plus padding positions n.. when n is not a multiple of the set size).

    Sets are ascending tuples, ordered by their first position, exactly as go-gpuallocator enumerates them.
    """

    sets: tuple[tuple[int, ...], ...]
    score: int
    padding: frozenset[int]


@record
class _Plan:
    """The weight-independent search graph for n items in sets of k (cached per n, k).

    A state is the bitmask of positions not yet in a set; from each state an edge takes one set: the state's
    lowest position plus size-1 others, with all of the padding or none of it (go-gpuallocator's recursion).
    States are numbered layer by layer from the root (every position) to the empty state (the last id); the
    edges of state i are edge_blocks/edge_children[edge_start[i]:edge_start[i + 1]].
    """

    width: int  # n padded up to a multiple of k
    pad_mask: int
    blocks: npt.NDArray[np.int64]  # every set an edge may take, as a bitmask
    block_pairs: npt.NDArray[np.intp]  # per set: every pair (a, b) in it as a * width + b, to gather its weights
    enumeration_keys: npt.NDArray[np.int64]  # per set: the larger, the earlier go-gpuallocator enumerates it
    layer_states: tuple[tuple[int, int], ...]  # per layer: [first, end) state ids, root layer first
    edge_start: npt.NDArray[np.int64]
    edge_blocks: npt.NDArray[np.intp]
    edge_children: npt.NDArray[np.intp]

    @property
    def state_count(self) -> int:
        return len(self.edge_start) - 1


def best_partition(weights: Sequence[Sequence[int]], size: int, required: Collection[int] = ()) -> Partition | None:
    """go-gpuallocator's rule over pair weights: the first-enumerated highest-scoring partition into sets of `size`.

    Positions are padded with empty slots to a multiple of `size`; a set holds all of the padding or none of it.
    Only partitions with a padding-free set holding every `required` position count; None when there is none.
    The answer equals exhaustive enumeration in go-gpuallocator's order (lexicographic by set, sets ordered by
    first position), ties included, but needs one pass over a cached search graph instead of every partition:
    the best score of every remaining-positions state, bottom up, then the first best edge from the root down.
    """
    import numpy as np

    count = len(weights)
    if not 1 <= size <= count:
        raise ValueError(f"set size must be between 1 and {count}, got {size}")
    if count > MAX_PARTITION_ITEMS:
        raise ValueError(f"at most {MAX_PARTITION_ITEMS} items, got {count}")
    if any(not 0 <= r < count for r in required):
        raise ValueError(f"required positions must be in 0..{count - 1}, got {sorted(required)}")
    plan = _plan(count, size)
    matrix = np.zeros((plan.width, plan.width))
    matrix[:count, :count] = np.asarray(weights, dtype=np.float64)
    values = matrix.ravel()[plan.block_pairs].sum(axis=1)  # set scores (a gather: no BLAS threads to wait for)

    required_mask = sum(1 << r for r in set(required))
    if required_mask:
        # A set holding some but not all required positions, or holding them next to padding, is ruled out:
        # then exactly the partitions with a padding-free set holding all of them remain.
        overlap = plan.blocks & required_mask
        allowed = (overlap == 0) | ((overlap == required_mask) & ((plan.blocks & plan.pad_mask) == 0))
        values = np.where(allowed, values, -np.inf)

    best = np.full(plan.state_count, -np.inf)
    best[-1] = 0.0  # the empty state
    for first, end in reversed(plan.layer_states):
        lo, hi = plan.edge_start[first], plan.edge_start[end]
        totals = values[plan.edge_blocks[lo:hi]] + best[plan.edge_children[lo:hi]]
        best[first:end] = np.maximum.reduceat(totals, plan.edge_start[first:end] - lo)
    if best[0] == -np.inf:
        return None

    sets = []
    state = 0
    while state != plan.state_count - 1:
        lo, hi = plan.edge_start[state], plan.edge_start[state + 1]
        totals = values[plan.edge_blocks[lo:hi]] + best[plan.edge_children[lo:hi]]
        ties = lo + np.flatnonzero(totals == best[state])
        chosen = int(ties[np.argmax(plan.enumeration_keys[plan.edge_blocks[ties]])])
        sets.append(_positions(int(plan.blocks[plan.edge_blocks[chosen]])))
        state = int(plan.edge_children[chosen])
    return Partition(tuple(sets), round(float(best[0])), frozenset(range(count, plan.width)))


def _positions(mask: int) -> tuple[int, ...]:
    return tuple(i for i in range(mask.bit_length()) if mask >> i & 1)


@lru_cache(maxsize=32)
def _plan(count: int, size: int) -> _Plan:
    import numpy as np

    width = -(-count // size) * size
    pad_count = width - count
    pad_mask = ((1 << width) - 1) ^ ((1 << count) - 1)
    # Every set an edge can take: size real positions, or size-pad_count of them plus all of the padding.
    masks = [sum(1 << i for i in rest) for rest in combinations(range(count), size)]
    if pad_count:
        masks += [pad_mask + sum(1 << i for i in rest) for rest in combinations(range(count), size - pad_count)]
    blocks = np.sort(np.array(masks, dtype=np.int64))

    layer_states: list[tuple[int, int]] = []
    edge_counts: list[npt.NDArray[np.int64]] = []
    edge_blocks: list[npt.NDArray[np.intp]] = []
    edge_children: list[npt.NDArray[np.intp]] = []
    frontier = np.array([(1 << width) - 1], dtype=np.int64)
    next_id = 0
    while frontier[0] != 0:
        # The frontier is sorted, so states without the padding (the top bits) come first, then those with it;
        # within each group every state has the same number of real positions, so one combination table serves.
        holds_padding = (frontier & pad_mask) != 0
        layer_states.append((next_id, next_id + len(frontier)))
        next_id += len(frontier)
        per_state, taken = [], []
        for group in (frontier[~holds_padding], frontier[holds_padding]):
            if len(group):
                group_blocks = _next_sets(group, size, count, pad_mask if (group[0] & pad_mask) else 0, pad_count)
                per_state.append(np.full(len(group), group_blocks.shape[1], dtype=np.int64))
                taken.append(group_blocks)
        counts = np.concatenate(per_state)
        chosen = np.concatenate([t.ravel() for t in taken])
        children = np.repeat(frontier, counts) ^ chosen
        frontier, child_index = np.unique(children, return_inverse=True)
        edge_counts.append(counts)
        edge_blocks.append(np.searchsorted(blocks, chosen).astype(np.intp))
        edge_children.append((child_index.ravel() + next_id).astype(np.intp))
    edge_start = np.concatenate([[0], np.cumsum(np.concatenate([*edge_counts, [0]]))])  # the empty state: none
    # Sets of equal size come in lexicographic order of their ascending positions. Where two sorted tuples
    # first differ is the lowest bit of a XOR b, and the tuple owning it comes first: so with the bits reversed
    # (position 0 as the top bit) the earlier set is the larger number.
    bits = (blocks[:, None] >> np.arange(width, dtype=np.int64)) & 1
    plan = _Plan(
        width=width,
        pad_mask=pad_mask,
        blocks=blocks,
        block_pairs=_pairs_of(bits, size),
        enumeration_keys=(bits << np.arange(width - 1, -1, -1, dtype=np.int64)).sum(axis=1),
        layer_states=tuple(layer_states),
        edge_start=edge_start.astype(np.int64),
        edge_blocks=np.concatenate(edge_blocks),
        edge_children=np.concatenate(edge_children),
    )
    for array in (
        plan.blocks,
        plan.block_pairs,
        plan.enumeration_keys,
        plan.edge_start,
        plan.edge_blocks,
        plan.edge_children,
    ):
        array.flags.writeable = False  # shared by every caller (and thread) through the cache
    return plan


def _next_sets(states: npt.NDArray[np.int64], size: int, count: int, pad: int, pad_count: int) -> npt.NDArray[np.int64]:
    """For states with the same number of real positions (all holding the padding `pad`, or none): one row per
    state of every set go-gpuallocator may take next, the lowest position plus size-1 others."""
    import numpy as np

    low = states & -states
    rest = states ^ low ^ pad
    bits = ((rest[:, None] >> np.arange(count, dtype=np.int64)) & 1).astype(bool)
    others = np.nonzero(bits)[1].reshape(len(states), int(bits[0].sum()))  # each state's other reals, ascending
    values = np.left_shift(np.int64(1), others.astype(np.int64))
    tables = [(np.zeros_like(low), size - 1)]
    if pad:
        tables.append((np.full_like(low, pad), size - 1 - pad_count))
    columns = []
    for base, picks in tables:
        table = np.array(list(combinations(range(others.shape[1]), picks)), dtype=np.intp)
        table = table.reshape(len(table), picks)
        sets = np.repeat((low + base)[:, None], len(table), axis=1)
        for column in range(picks):
            sets += values[:, table[:, column]]
        columns.append(sets)
    return np.concatenate(columns, axis=1)


def _pairs_of(bits: npt.NDArray[np.int64], size: int) -> npt.NDArray[np.intp]:
    import numpy as np

    width = bits.shape[1]
    positions = np.nonzero(bits)[1].reshape(len(bits), size)  # each set's positions, ascending
    pairs = list(combinations(range(size), 2))
    if not pairs:
        return np.zeros((len(bits), 0), dtype=np.intp)
    first, second = (np.array(side, dtype=np.intp) for side in zip(*pairs, strict=True))
    pair_index: npt.NDArray[np.intp] = (positions[:, first] * width + positions[:, second]).astype(np.intp)
    return pair_index


def clear_search_cache() -> None:
    """Forget every cached search graph (benchmarks measure the cold path with it)."""
    _plan.cache_clear()
