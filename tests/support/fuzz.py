"""Hypothesis strategies for the fuzzers: hostile bytes, YAML-shaped text from known keys, JSON-like values."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hypothesis import strategies as st

# Edges every parser must survive: bombs, control and bidi characters, huge numbers, deep brackets.
NASTY_SCALARS = (
    "",
    "~",
    "null",
    "-1",
    "0",
    "1e400",
    "-.inf",
    ".nan",
    "9" * 5000,
    "0x7fffffffffffffff",
    "\x00",
    "\u202e",
    "\x1b[2J",
    "../../etc/passwd",
    "&a [*a]",
    "*undefined",
    "!!python/object:os.system",
    "[" * 200,
    "{" * 200,
    "'unterminated",
    '"\\xff"',
)


def yaml_scalars() -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(NASTY_SCALARS),
        st.integers(min_value=-(2**70), max_value=2**70).map(str),
        st.text(max_size=20),
    )


def yaml_documents(keys: Sequence[str], depth: int = 3) -> st.SearchStrategy[str]:
    """YAML text built from the format's own keys (so parsing goes deep) with hostile values and shapes."""
    scalar = yaml_scalars()

    def extend(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        mapping = st.lists(st.tuples(st.sampled_from(keys), children), max_size=4).map(
            lambda items: "{" + ", ".join(f"{key}: {value}" for key, value in items) + "}"
        )
        sequence = st.lists(children, max_size=4).map(lambda items: "[" + ", ".join(items) + "]")
        return st.one_of(mapping, sequence)

    return st.recursive(scalar, extend, max_leaves=20)


def json_values() -> st.SearchStrategy[Any]:
    leaves = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=16),
    )
    return st.recursive(
        leaves,
        lambda children: st.one_of(
            st.lists(children, max_size=4), st.dictionaries(st.text(max_size=12), children, max_size=4)
        ),
        max_leaves=20,
    )


def mutated(base: bytes) -> st.SearchStrategy[bytes]:
    """`base` with a few bytes flipped, inserted or cut: most of a valid file, broken somewhere."""

    def apply(edits: list[tuple[int, int, bytes]]) -> bytes:
        data = bytearray(base)
        for kind, position, chunk in edits:
            at = position % (len(data) + 1)
            if kind == 0:
                data[at:at] = chunk
            elif kind == 1:
                del data[at : at + len(chunk)]
            elif data:
                data[at % len(data)] ^= chunk[0] if chunk else 0xFF
        return bytes(data)

    edit = st.tuples(st.integers(0, 2), st.integers(0, 1 << 16), st.binary(min_size=1, max_size=8))
    return st.lists(edit, min_size=1, max_size=6).map(apply)
