"""The two readers of a config mapping (config.direct and the pydantic schema), held to the same answer."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields, is_dataclass
from typing import Any

from pydantic import ValidationError

from gpuslice.config import direct
from gpuslice.config.model import Config
from gpuslice.config.schema import read_with_schema

Read = tuple[Config, tuple[str, ...]]


def snapshot(value: Any) -> Any:
    """Settings as nested tuples, `explicit` included (dataclass equality leaves it out)."""
    if is_dataclass(value) and not isinstance(value, type):
        parts = [(item.name, snapshot(getattr(value, item.name))) for item in fields(value)]
        return (type(value).__name__, tuple(parts))
    if isinstance(value, tuple | frozenset):
        items = sorted(value) if isinstance(value, frozenset) else value
        return (type(value).__name__, tuple(snapshot(item) for item in items))
    return (type(value).__name__, value)


def agreeing_read(data: Mapping[str, Any], read_direct: Any = direct.read_direct) -> Read | None:
    """What the direct reader answers, after checking that the schema answers the same or refuses it.

    The direct reader may refer (None) a mapping the schema accepts; it must never accept one the schema
    refuses, nor read one otherwise (settings, `explicit`, unknown keys and their order).
    """
    fast = read_direct(data)
    try:
        slow = read_with_schema(data)
    except ValidationError:
        assert fast is None, f"the direct reader accepted what the schema refuses: {data!r}"
        return None
    except Exception:  # the schema raising something else (a huge float, say): the direct reader must refer
        assert fast is None, f"the direct reader accepted what the schema fails on: {data!r}"
        raise
    if fast is not None:
        assert snapshot(fast[0]) == snapshot(slow[0]), f"the readers disagree on {data!r}"
        assert fast[1] == slow[1], f"the readers find other unknown keys in {data!r}"
    return fast
