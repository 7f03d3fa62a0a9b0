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
# register. A record compiles only its __init__ (the one method whose code depends on the fields), and only
# when the class is first used: about half the classes a start defines are not made before it serves, and
# many never. The other methods are the functions below, read once from this module's bytecode and told the
# fields by the class. The fields are read by _read_fields as dataclass() would record them, in under half
# its time; a class whose annotations it cannot be sure of goes to dataclass() itself. Behaviour is a frozen
# dataclass's: `dataclasses.fields`, `replace`, `asdict`, pickling, `inspect.signature` and `__match_args__`
# work as they do for one; equality, ordering, hashing and repr give the same results; assigning or deleting
# an attribute raises FrozenInstanceError; a field without a default after one with a default, a mutable
# default and a Field without an annotation are refused when the class is made (tests/house/test_records.py
# holds the two side by side). The __init__ is the one a frozen dataclass has: each field set with
# object.__setattr__, so making an instance costs the same.


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
    raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")


def _delattr(self: Any, name: str) -> None:
    raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")


def _init_of(cls: Any) -> Callable[..., None]:
    """The __init__ a frozen dataclass of `cls`'s fields has, compiled now and set on `cls`."""
    namespace: dict[str, Any] = {"__name__": cls.__module__, "_set": object.__setattr__, "_MISSING": _MISSING}
    positional: list[str] = []
    keywords: list[str] = []
    body: list[str] = []
    annotations: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        name = field.name
        if field.default_factory is not dataclasses.MISSING:
            namespace[f"_factory_{name}"] = field.default_factory
            made = f"_factory_{name}()"
            value = f"{made} if {name} is _MISSING else {name}" if field.init else made
            parameter = f"{name}=_MISSING"
        elif field.default is not dataclasses.MISSING:
            namespace[f"_default_{name}"] = field.default
            value = name if field.init else f"_default_{name}"
            parameter = f"{name}=_default_{name}"
        else:  # init=False fields always have a default (_make_record checks)
            value = parameter = name
        if field.init:
            (keywords if field.kw_only else positional).append(parameter)
            annotations[name] = field.type
        body.append(f"    _set(__record_self__, {name!r}, {value})")
    if hasattr(cls, "__post_init__"):
        body.append("    __record_self__.__post_init__()")
    parameters = ", ".join(["__record_self__", *positional, *(["*", *keywords] if keywords else [])])
    exec(f"def __init__({parameters}):\n" + ("\n".join(body) or "    pass"), namespace)
    init: Callable[..., None] = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__annotations__ = {**annotations, "return": None}
    cls.__init__ = init
    return init


class _MissingType:
    """The default of a factory field's parameter: no value was given, so the factory makes one."""

    def __repr__(self) -> str:
        return "<factory>"


_MISSING = _MissingType()


class _LazyInit:
    """A record's __init__ until the class is first used (made, or its signature read): then the real one."""

    def __init__(self, owner: type) -> None:
        self._owner = owner

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        init = _init_of(self._owner)
        return init if instance is None else init.__get__(instance, owner)


# What dataclass(init=False, repr=False, eq=False) records on a class: taken from one such class, so that
# records carry dataclasses' own markers (fields() keeps a field by its kind; a subclass reads the flags).
_Reference: Any = dataclasses.dataclass(init=False, repr=False, eq=False)(
    type("_Reference", (), {"__annotations__": {"value": "int"}, "__doc__": "r"})
)
_PARAMS = _Reference.__dataclass_params__
_FIELD_KIND = dataclasses.fields(_Reference)[0]._field_type  # type: ignore[attr-defined]
# An annotation naming one of these is more than a field's type: dataclass() reads such a class itself.
_SPECIAL_ANNOTATIONS = ("ClassVar", "InitVar", "KW_ONLY")


def _read_fields(cls: type, kw_only: bool) -> bool:
    """Record `cls`'s fields as dataclass(init=False, repr=False, eq=False) does; False, having changed
    nothing, for a class whose annotations that reading cannot be sure of (not text, or naming ClassVar,
    InitVar or KW_ONLY), which dataclass() then reads.

    dataclass() asks three times of every field whether its annotation text names ClassVar, InitVar or
    KW_ONLY, resolving the name in the class's module, and builds each Field through three calls: most of
    the 40 us a record class cost it, and a start makes some sixty."""
    own = cls.__dict__
    annotations: dict[str, Any] = own.get("__annotations__", {})
    for annotation in annotations.values():
        if not isinstance(annotation, str) or any(word in annotation for word in _SPECIAL_ANNOTATIONS):
            return False
    for name, value in own.items():
        if isinstance(value, dataclasses.Field) and name not in annotations:
            raise TypeError(f"{name!r} is a field but has no type annotation")
    fields: dict[str, dataclasses.Field[Any]] = {}
    for base in cls.__mro__[-1:0:-1]:  # inherited first, the nearest base last, as dataclass() takes them
        fields.update(getattr(base, "__dataclass_fields__", None) or {})
    for name, annotation in annotations.items():
        value = own.get(name, dataclasses.MISSING)
        field: dataclasses.Field[Any] = (
            value if isinstance(value, dataclasses.Field) else dataclasses.field(default=value)
        )
        field.name, field.type = name, annotation
        field._field_type = _FIELD_KIND  # type: ignore[attr-defined]  # dataclasses' own marker, as it sets it
        if field.kw_only is dataclasses.MISSING:
            field.kw_only = kw_only  # type: ignore[assignment]
        if field.default is not dataclasses.MISSING and field.default.__class__.__hash__ is None:
            raise ValueError(
                f"mutable default {type(field.default)} for field {name} is not allowed: use default_factory"
            )
        if isinstance(value, dataclasses.Field):  # the class keeps the default, as a plain class attribute
            if field.default is dataclasses.MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, field.default)
        fields[name] = field
    type.__setattr__(cls, "__dataclass_fields__", fields)
    type.__setattr__(cls, "__dataclass_params__", _PARAMS)
    if "__match_args__" not in own:
        type.__setattr__(cls, "__match_args__", tuple(f.name for f in fields.values() if f.init and not f.kw_only))
    return True


def _check_order(cls: type, fields: tuple[dataclasses.Field[Any], ...]) -> None:
    """dataclass()'s rule, checked when the class is made: a positional field without a default may not follow
    one with a default."""
    defaulted = False
    for field in fields:
        if not field.init or field.kw_only:
            continue
        has_default = field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING
        if defaulted and not has_default:
            raise TypeError(f"non-default argument {field.name!r} follows default argument")
        defaulted = defaulted or has_default


def _make_record(cls: type[_T], kw_only: bool, order: bool) -> type[_T]:
    own = cls.__dict__
    class_hash = own.get("__hash__", dataclasses.MISSING)
    # dataclass()'s rule: a __hash__ the class states is kept; the None that a body with __eq__ only gets is not
    stated_hash = not (class_hash is dataclasses.MISSING or (class_hash is None and "__eq__" in own))
    for method in ("__setattr__", "__delattr__", *(_ORDER if order else ())):
        if method in own:
            raise TypeError(f"Cannot overwrite attribute {method} in class {cls.__name__}")
    if _read_fields(cls, kw_only):
        made = cls
    else:
        made = dataclasses.dataclass(cls, init=False, eq=False, repr=False, kw_only=kw_only)
    spec: Any = made  # the class, told its fields under names the shared functions read
    fields = dataclasses.fields(spec)
    for field in fields:
        unset = field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
        if not field.init and unset:
            raise TypeError(f"{cls.__name__}.{field.name}: a record field with init=False needs a default")
    _check_order(cls, fields)
    spec.__init__ = _LazyInit(spec)
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
