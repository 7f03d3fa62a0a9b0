"""Records: frozen dataclasses whose comparison, hash, repr and frozen guard are shared, not compiled per class."""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable
from operator import attrgetter
from reprlib import recursive_repr
from typing import Any, TypeVar, dataclass_transform

_T = TypeVar("_T")

# Why not @dataclass(frozen=True): on Python 3.11 it compiles six methods for every class (__init__,
# __repr__, __eq__, __hash__, __setattr__, __delattr__, and four more with order=True), each through its own
# exec(): about 0.4 ms a class, and the plugin's start builds some sixty, a fifth of the time it takes to
# register. A record compiles only its __init__ (the one method whose code depends on the fields); the others
# are the functions below, read once from this module's bytecode and told the fields by the class. Behaviour
# is a frozen dataclass's: `dataclasses.fields`, `replace`, `asdict`, pickling and `__match_args__` work as
# they do for one; equality, ordering, hashing and repr give the same results; assigning or deleting an
# attribute raises FrozenInstanceError (tests/house/test_records.py holds the two side by side). The price:
# making an instance takes about twice as long (1.3 against 0.6 us for six fields), which is why the
# simulator's hot loops keep plain frozen dataclasses.
#
# The guard: the generated (non-frozen) __init__ sets each field once through __setattr__, so a field may be
# set while it has no value yet and never again; every field has a value once __init__ returns (a field
# declared init=False must have a default, which __init__ sets too). Any other name is refused, as it is on a
# frozen dataclass. (__post_init__ may set fields with object.__setattr__, as on a frozen dataclass.)


def _tuple_of(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """A function giving an instance's values of `names` as a tuple (what a dataclass compares and hashes)."""
    if not names:
        return lambda instance: ()
    if len(names) == 1:
        one = attrgetter(names[0])
        return lambda instance: (one(instance),)
    return attrgetter(*names)


def _eq(self: Any, other: Any) -> Any:
    if other.__class__ is self.__class__:
        values = self.__class__._record_compared
        return values(self) == values(other)
    return NotImplemented


def _ordering(compare: Callable[[tuple[Any, ...], tuple[Any, ...]], bool]) -> Callable[[Any, Any], Any]:
    """One of the four order methods dataclass(order=True) writes: the fields' tuples compared, same class only."""

    def method(self: Any, other: Any) -> Any:
        if other.__class__ is self.__class__:
            values = self.__class__._record_compared
            return compare(values(self), values(other))
        return NotImplemented

    return method


_ORDER = {
    "__lt__": _ordering(operator.lt),
    "__le__": _ordering(operator.le),
    "__gt__": _ordering(operator.gt),
    "__ge__": _ordering(operator.ge),
}


def _hash(self: Any) -> int:
    return hash(self.__class__._record_hashed(self))


@recursive_repr()
def _repr(self: Any) -> str:
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__class__._record_shown)
    return f"{self.__class__.__qualname__}({shown})"


def _setattr(self: Any, name: str, value: Any) -> None:
    if name in self.__dict__ or name not in self.__class__._record_fields:
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
    object.__setattr__(self, name, value)


def _delattr(self: Any, name: str) -> None:
    raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")


def _make_record(cls: type[_T], kw_only: bool, order: bool) -> type[_T]:
    own = cls.__dict__
    class_hash = own.get("__hash__", dataclasses.MISSING)
    # dataclass()'s rule: a __hash__ the class states is kept; the None that a body with __eq__ only gets is not
    stated_hash = not (class_hash is dataclasses.MISSING or (class_hash is None and "__eq__" in own))
    for method in ("__setattr__", "__delattr__", *(_ORDER if order else ())):
        if method in own:
            raise TypeError(f"Cannot overwrite attribute {method} in class {cls.__name__}")
    made = dataclasses.dataclass(cls, eq=False, repr=False, kw_only=kw_only)
    spec: Any = made  # the class, told its fields under names the shared functions read
    fields = dataclasses.fields(spec)
    for field in fields:
        unset = field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
        if not field.init and unset:
            raise TypeError(f"{cls.__name__}.{field.name}: a record field with init=False needs a default")
    spec._record_fields = frozenset(field.name for field in fields)
    spec._record_compared = _tuple_of(tuple(f.name for f in fields if f.compare))
    spec._record_hashed = _tuple_of(tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash)))
    spec._record_shown = tuple(f.name for f in fields if f.repr)
    # what the class states itself stays, as dataclass() leaves it
    if "__eq__" not in own:
        spec.__eq__ = _eq
    if "__repr__" not in own:
        spec.__repr__ = _repr
    if not stated_hash:
        spec.__hash__ = _hash
    if order:
        for name, function in _ORDER.items():
            setattr(spec, name, function)
    spec.__setattr__ = _setattr
    spec.__delattr__ = _delattr
    return made


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field, dataclasses.Field))
def record(cls: type[_T] | None = None, /, *, kw_only: bool = False, order: bool = False) -> Any:
    """`@record`, `@record(kw_only=True)`, `@record(order=True)`: what `@dataclass(frozen=True, ...)` gives,
    built in a third of its time."""

    def wrap(target: type[_T]) -> type[_T]:
        return _make_record(target, kw_only, order)

    return wrap if cls is None else wrap(cls)
