"""A record behaves as @dataclass(frozen=True) does: the same class body built both ways, side by side."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import operator
import pickle
from collections.abc import Callable
from dataclasses import field
from typing import Any, ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuslice.records import record


def _body() -> dict[str, Any]:
    """One class body with every kind of field a record supports: plain, default, factory, and flags."""
    return {
        "__annotations__": {
            "name": "str",
            "count": "int",
            "tags": "tuple[str, ...]",
            "extra": "dict[str, str]",
            "hidden": "str",
            "uncompared": "int",
        },
        "__doc__": "A sample.",
        "count": 0,
        "tags": (),
        "extra": field(default_factory=dict, compare=False, hash=False),
        "hidden": field(default="h", repr=False),
        "uncompared": field(default=0, compare=False),
    }


def _pair(body: Callable[[], dict[str, Any]] = _body, **flags: Any) -> tuple[Any, Any]:
    """The same body as a record and as a frozen dataclass (each gets a fresh copy: dataclass() edits it)."""
    as_record: Any = record(**flags)(type("Sample", (), body()))
    as_dataclass: Any = dataclasses.dataclass(frozen=True, **flags)(type("Sample", (), body()))
    return as_record, as_dataclass


RECORD, DATACLASS = _pair()
VALUES = [
    {"name": "a"},
    {"name": "a", "count": 2, "tags": ("x", "y")},
    {"name": "a", "extra": {"k": "v"}},
    {"name": "a", "hidden": "other"},
    {"name": "a", "uncompared": 5},
    {"name": "b", "count": -1, "tags": ("x",), "extra": {}, "hidden": "", "uncompared": 1},
]


@pytest.mark.parametrize("left", VALUES)
@pytest.mark.parametrize("right", VALUES)
def test_equality_and_hash_are_a_frozen_dataclass_s(left: dict[str, Any], right: dict[str, Any]) -> None:
    assert (RECORD(**left) == RECORD(**right)) == (DATACLASS(**left) == DATACLASS(**right))
    assert (RECORD(**left) != RECORD(**right)) == (DATACLASS(**left) != DATACLASS(**right))
    assert (hash(RECORD(**left)) == hash(RECORD(**right))) == (hash(DATACLASS(**left)) == hash(DATACLASS(**right)))
    assert hash(RECORD(**left)) == hash(DATACLASS(**left))  # both hash the same tuple of fields


@given(name=st.text(max_size=8), count=st.integers(), tags=st.lists(st.text(max_size=3), max_size=3))
def test_any_values_compare_hash_and_print_alike(name: str, count: int, tags: list[str]) -> None:
    ours, theirs = RECORD(name, count, tuple(tags)), DATACLASS(name, count, tuple(tags))
    assert repr(ours) == repr(theirs)
    assert hash(ours) == hash(theirs)
    assert ours == RECORD(name, count, tuple(tags))


@pytest.mark.parametrize("values", VALUES)
def test_repr_fields_and_helpers_are_a_frozen_dataclass_s(values: dict[str, Any]) -> None:
    ours, theirs = RECORD(**values), DATACLASS(**values)
    assert repr(ours) == repr(theirs)
    assert dataclasses.asdict(ours) == dataclasses.asdict(theirs)
    assert dataclasses.astuple(ours) == dataclasses.astuple(theirs)
    assert [f.name for f in dataclasses.fields(ours)] == [f.name for f in dataclasses.fields(theirs)]
    assert RECORD.__match_args__ == DATACLASS.__match_args__
    assert dataclasses.replace(ours, count=9) == RECORD(**{**values, "count": 9})
    assert copy.deepcopy(ours) == ours and copy.copy(ours) == ours


@record
class Point:
    """A record pickle can find by name."""

    x: int
    labels: dict[str, str] = field(default_factory=dict, compare=False)


def test_a_record_pickles_and_unpickles_frozen() -> None:
    point = pickle.loads(pickle.dumps(Point(1, {"a": "b"})))
    assert point == Point(1) and point.labels == {"a": "b"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        point.x = 2  # type: ignore[misc]


def test_comparing_with_another_type_is_not_equal() -> None:
    assert RECORD("a") != DATACLASS("a")
    assert RECORD("a") != ("a", 0, (), {}, "h", 0)
    assert RECORD("a").__eq__(object()) is NotImplemented


@pytest.mark.parametrize("cls", [RECORD, DATACLASS], ids=["record", "dataclass"])
@pytest.mark.parametrize("name", ["name", "count", "extra", "not_a_field"])
def test_assigning_or_deleting_any_attribute_raises(cls: type, name: str) -> None:
    instance = cls("a")
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(instance, name, 1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        delattr(instance, name)
    assert instance == cls("a")


def test_post_init_may_set_a_field_as_on_a_frozen_dataclass() -> None:
    def body() -> dict[str, Any]:
        def __post_init__(self: Any) -> None:  # noqa: N807 (the dataclass hook's name)
            object.__setattr__(self, "doubled", self.value * 2)

        return {
            "__annotations__": {"value": "int", "doubled": "int"},
            "__doc__": "d",
            "doubled": 0,
            "__post_init__": __post_init__,
        }

    ours, theirs = _pair(body)
    assert ours(3).doubled == theirs(3).doubled == 6


def test_kw_only_is_a_frozen_dataclass_s() -> None:
    ours, theirs = _pair(kw_only=True)
    assert ours(name="a", count=1) == ours(name="a", count=1)
    assert repr(ours(name="a")) == repr(theirs(name="a"))
    for cls in (ours, theirs):
        with pytest.raises(TypeError):
            cls("a")


def test_what_a_class_states_itself_is_kept() -> None:
    def body() -> dict[str, Any]:
        return {
            "__annotations__": {"value": "int"},
            "__doc__": "e",
            "__eq__": lambda self, other: True,
            "__hash__": lambda self: 7,
            "__repr__": lambda self: "mine",
        }

    for cls in _pair(body):
        assert cls(1) == cls(2) and hash(cls(1)) == 7 and repr(cls(1)) == "mine"


def test_a_body_with_its_own_eq_still_gets_a_field_hash() -> None:
    def body() -> dict[str, Any]:
        return {"__annotations__": {"value": "int"}, "__doc__": "q", "__eq__": lambda self, other: True}

    ours, theirs = _pair(body)
    assert hash(ours(4)) == hash(theirs(4)) == hash((4,))


def test_a_recursive_repr_stops_as_a_dataclass_s_does() -> None:
    ours, theirs = _pair()
    loop_ours, loop_theirs = ours("a", extra={}), theirs("a", extra={})
    loop_ours.extra["self"] = loop_ours
    loop_theirs.extra["self"] = loop_theirs
    assert repr(loop_ours) == repr(loop_theirs)


def test_a_record_subclass_of_a_record_is_a_record() -> None:
    @record
    class Base:
        """b"""

        a: int

    @record
    class Child(Base):
        """c"""

        b: int = 0

    assert Child(1, 2) == Child(1, 2) != Child(1, 3)
    assert repr(Child(1)) == "test_a_record_subclass_of_a_record_is_a_record.<locals>.Child(a=1, b=0)"
    with pytest.raises(dataclasses.FrozenInstanceError):
        Child(1).a = 2  # type: ignore[misc]


def test_an_init_false_field_without_a_default_is_refused() -> None:
    with pytest.raises(TypeError, match="init=False"):
        record(type("Bad", (), {"__annotations__": {"late": "int"}, "late": field(init=False)}))


@pytest.mark.parametrize("method", ["__setattr__", "__delattr__"])
def test_a_body_with_its_own_frozen_guard_is_refused(method: str) -> None:
    with pytest.raises(TypeError, match="Cannot overwrite"):
        record(type("Bad", (), {"__annotations__": {"a": "int"}, method: lambda *args: None}))


def test_order_is_a_frozen_dataclass_s() -> None:
    ours, theirs = _pair(order=True)
    pairs: list[tuple[dict[str, Any], dict[str, Any]]] = [
        ({"name": "a"}, {"name": "b"}),
        ({"name": "a", "count": 2}, {"name": "a", "count": 1}),
        ({"name": "x"}, {"name": "x"}),
    ]
    for left, right in pairs:
        for compare in (operator.lt, operator.le, operator.gt, operator.ge):
            assert compare(ours(**left), ours(**right)) == compare(theirs(**left), theirs(**right))
    assert sorted([ours("b"), ours("a")]) == [ours("a"), ours("b")]
    with pytest.raises(TypeError):
        _ = ours("a") < theirs("a")


def test_the_signature_is_a_frozen_dataclass_s_before_and_after_first_use() -> None:
    ours, theirs = _pair()
    assert "__init__" in ours.__dict__ and not inspect.isfunction(ours.__dict__["__init__"])  # not built yet
    # reading it builds the __init__ (a factory's default is our own marker, shown as dataclass() shows its own)
    assert str(inspect.signature(ours)) == str(inspect.signature(theirs))
    assert inspect.isfunction(ours.__dict__["__init__"])
    built = ours.__dict__["__init__"]
    ours("a")
    assert ours.__dict__["__init__"] is built  # built once
    kw_ours, kw_theirs = _pair(kw_only=True)
    kw_ours(name="a")  # first made, then read
    assert str(inspect.signature(kw_ours)) == str(inspect.signature(kw_theirs))


def test_factory_fields_make_a_fresh_value_each_time_unless_given() -> None:
    first, second = RECORD("a"), RECORD("a")
    assert first.extra == {} and first.extra is not second.extra
    given = {"k": "v"}
    assert RECORD("a", extra=given).extra is given


def test_a_plain_subclass_of_a_record_is_made_by_the_record_s_init() -> None:
    ours, _ = _pair()
    plain = type("Plain", (ours,), {})
    assert plain("a", 2).count == 2 and type(plain("a")) is plain


@pytest.mark.parametrize("maker", [record, dataclasses.dataclass(frozen=True)], ids=["record", "dataclass"])
def test_a_field_without_a_default_after_one_with_is_refused_when_made(maker: Any) -> None:
    with pytest.raises(TypeError, match="non-default argument 'late' follows default argument"):
        maker(type("Bad", (), {"__annotations__": {"early": "int", "late": "int"}, "early": 0}))
    kw_after_default = maker(kw_only=True) if maker is record else dataclasses.dataclass(frozen=True, kw_only=True)
    made: Any = kw_after_default(type("Fine", (), {"__annotations__": {"early": "int", "late": "int"}, "early": 0}))
    assert made(late=1).early == 0


FIELD_ATTRIBUTES = (
    "name",
    "type",
    "default",
    "default_factory",
    "init",
    "repr",
    "hash",
    "compare",
    "metadata",
    "kw_only",
)


def _described(cls: Any) -> list[tuple[Any, ...]]:
    return [tuple(getattr(f, attribute) for attribute in FIELD_ATTRIBUTES) for f in dataclasses.fields(cls)]


def _kw_body() -> dict[str, Any]:
    body = _body()
    body["extra"] = field(default_factory=dict, kw_only=False)  # a field's own kw_only wins over the class's
    return body


@pytest.mark.parametrize(
    ("body", "flags"),
    [(_body, {}), (_body, {"kw_only": True}), (_kw_body, {"kw_only": True}), (_body, {"order": True})],
    ids=["plain", "kw_only", "kw_only-but-one", "order"],
)
def test_fields_and_class_attributes_are_a_frozen_dataclass_s(body: Callable[[], dict[str, Any]], flags: Any) -> None:
    ours, theirs = _pair(body, **flags)
    assert _described(ours) == _described(theirs)
    assert ours.__match_args__ == theirs.__match_args__
    for name in body()["__annotations__"]:  # a default stays a class attribute; a Field without one goes
        assert ours.__dict__.get(name, "absent") == theirs.__dict__.get(name, "absent")
    assert dataclasses.is_dataclass(ours)


def test_an_inherited_field_keeps_its_place_and_a_redefined_one_its_new_default() -> None:
    def make(maker: Any) -> Any:
        base = maker(type("Base", (), {"__annotations__": {"a": "int", "b": "int"}, "b": 1}))
        return maker(type("Child", (base,), {"__annotations__": {"c": "int", "a": "int"}, "c": 3, "a": 0}))

    assert _described(make(record)) == _described(make(dataclasses.dataclass(frozen=True)))


def test_a_class_variable_is_not_a_field() -> None:
    def body() -> dict[str, Any]:  # (dataclass() reads a class that has one, as text or not)
        return {"__annotations__": {"name": "str", "registry": ClassVar[dict[str, int]]}, "registry": {}}

    ours, theirs = _pair(body)
    assert _described(ours) == _described(theirs) and [f.name for f in dataclasses.fields(ours)] == ["name"]
    assert ours("a").registry == {}


@pytest.mark.parametrize("maker", [record, dataclasses.dataclass(frozen=True)], ids=["record", "dataclass"])
def test_a_mutable_default_or_an_unannotated_field_is_refused_alike(maker: Any) -> None:
    with pytest.raises(ValueError, match="mutable default <class 'list'> for field tags is not allowed"):
        maker(type("Bad", (), {"__annotations__": {"tags": "list[str]"}, "tags": []}))
    with pytest.raises(TypeError, match="'loose' is a field but has no type annotation"):
        maker(type("Bad", (), {"__annotations__": {}, "loose": field(default=1)}))
