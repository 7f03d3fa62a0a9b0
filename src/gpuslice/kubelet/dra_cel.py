"""The mock kubelet's CEL: Google's CEL (cel-expr-python) with Kubernetes' DRA environment, typing and cost limit.

`device` is a map with `driver` (string), `attributes` (domain -> name -> int, bool, string or
`kubernetes.Semver`) and `capacity` (domain -> name -> `kubernetes.Quantity`). Kubernetes' semver and
quantity libraries are declared with their types, so `>=` on a version is the compile error it is in
Kubernetes (`no matching overload for '_>=_'`), and `semver(..)`/`quantity(..)` values compare only with
their methods (`compareTo`, `isGreaterThan`, `isLessThan`, ...). See docs/kubelet-mock.md.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from functools import cache
from typing import Any

MAX_EXPRESSION = 10 * 1024  # resource.k8s.io's CELSelectorExpressionMaxLength
MAX_COST = 1_000_000  # resource.k8s.io's CELSelectorExpressionMaxCost
# The most entries a cost estimate assumes for a collection a macro walks: a device has at most 32
# attributes and capacities in all (ResourceSliceMaxAttributesAndCapacitiesPerDevice).
MAX_COLLECTION = 32
MACROS = ("all", "exists", "exists_one", "map", "filter")
SEMVER_TYPE = "kubernetes.Semver"
QUANTITY_TYPE = "kubernetes.Quantity"

_SEMVER = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*))?"
    r"(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?"
)
_QUANTITY = re.compile(r"([+-]?(?:\d+\.?\d*|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+)?")
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DOMAIN_LOOKUP = re.compile(r"device\s*\.\s*(attributes|capacity)\s*\[\s*(?:'([^'\\]*)'|\"([^\"\\]*)\")\s*\]")
_TOKEN = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[A-Za-z_][A-Za-z0-9_]*|\d+|\S")


class CelError(ValueError):
    """An expression that does not compile in the DRA environment, costs too much, or fails on a device."""


# Values --------------------------------------------------------------------------------------------


def parse_quantity(text: str) -> Fraction:
    """A Kubernetes quantity (`10Gi`, `1.5`, `500m`, `1e3`) as an exact number; CelError when it is not one."""
    match = _QUANTITY.fullmatch(text.strip())
    if match is None or not text.strip():
        raise CelError(f"quantity {text!r}: not a Kubernetes quantity")
    number, suffix = Fraction(match[1]), match[2] or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    exponent = int(suffix[1:]) if suffix[:1] in ("e", "E") else _DECIMAL[suffix]
    return number * Fraction(10) ** exponent


def quantity(text: str) -> int:
    """A whole quantity (a counter, a capacity in bytes) as an int; CelError for a fraction."""
    value = parse_quantity(text)
    if value.denominator != 1:
        raise CelError(f"quantity {text!r} is not a whole number")
    return int(value)


def parse_semver(text: str) -> tuple[int, int, int, tuple[Any, ...]]:
    """A semantic version 2.0.0 as a sort key (pre-releases before the release; build metadata ignored)."""
    match = _SEMVER.fullmatch(text)
    if match is None:
        raise CelError(f"semver {text!r}: not a semantic version (MAJOR.MINOR.PATCH)")
    pre: tuple[Any, ...] = (1,)  # a release sorts after every pre-release of it
    if match[4]:
        pre = (0, *((0, int(p), "") if p.isdigit() else (1, 0, p) for p in match[4].split(".")))
    return int(match[1]), int(match[2]), int(match[3]), pre


def _sign(value: Fraction | int) -> int:
    return (value > 0) - (value < 0)


@cache
def _runtime() -> Any:
    """The CEL environment, built once: cel-expr-python and the proto types of semver and quantity."""
    try:
        from cel_expr_python import cel
    except ImportError as exc:  # the demo extra: the mock kubelet runs in the demo and the tests
        raise CelError("the mock kubelet's CEL needs cel-expr-python (pip install 'gpuslice[demo]')") from exc
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    proto = descriptor_pb2.FileDescriptorProto(name="gpuslice/kubelet/dra_cel.proto", package="kubernetes")
    proto.syntax = "proto3"
    for name, field in (("Semver", "version"), ("Quantity", "value")):
        message = proto.message_type.add(name=name)
        message.field.add(name=field, number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING, label=1)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    semver_class = message_factory.GetMessageClass(pool.FindMessageTypeByName(SEMVER_TYPE))
    quantity_class = message_factory.GetMessageClass(pool.FindMessageTypeByName(QUANTITY_TYPE))
    return _Runtime(cel, pool, semver_class, quantity_class)


class _Runtime:
    def __init__(self, cel: Any, pool: Any, semver_class: Any, quantity_class: Any) -> None:
        self.cel = cel
        self.semver_class = semver_class
        self.quantity_class = quantity_class
        t = cel.Type
        semver_t, quantity_t = t(SEMVER_TYPE), t(QUANTITY_TYPE)

        def new_semver(text: str) -> Any:
            parse_semver(text)
            return semver_class(version=text)

        def new_quantity(text: str) -> Any:
            parse_quantity(text)
            return quantity_class(value=text)

        def sv(message: Any) -> tuple[int, int, int, tuple[Any, ...]]:
            return parse_semver(message.version)

        def qv(message: Any) -> Fraction:
            return parse_quantity(message.value)

        def order(a: Any, b: Any) -> int:
            if a.DESCRIPTOR.full_name == SEMVER_TYPE:
                return (sv(a) > sv(b)) - (sv(a) < sv(b))
            return _sign(qv(a) - qv(b))

        def q_of(value: Fraction) -> Any:
            text = str(value.numerator) if value.denominator == 1 else f"{float(value)!r}"
            return quantity_class(value=text)

        def valid(check: Callable[[str], object]) -> Callable[[str], bool]:
            def test(text: str) -> bool:
                try:
                    check(text)
                except CelError:
                    return False
                return True

            return test

        def member(name: str, receiver: Any, args: list[Any], result: Any, impl: Callable[..., Any]) -> Any:
            return cel.Overload(name, result, [receiver, *args], is_member=True, impl=impl)

        overloads: dict[str, list[Any]] = {
            "semver": [cel.Overload("semver_string", semver_t, [t.STRING], impl=new_semver)],
            "isSemver": [cel.Overload("is_semver_string", t.BOOL, [t.STRING], impl=valid(parse_semver))],
            "quantity": [cel.Overload("quantity_string", quantity_t, [t.STRING], impl=new_quantity)],
            "isQuantity": [cel.Overload("is_quantity_string", t.BOOL, [t.STRING], impl=valid(parse_quantity))],
            "major": [member("semver_major", semver_t, [], t.INT, lambda a: sv(a)[0])],
            "minor": [member("semver_minor", semver_t, [], t.INT, lambda a: sv(a)[1])],
            "patch": [member("semver_patch", semver_t, [], t.INT, lambda a: sv(a)[2])],
            # The runtime tells overloads apart by kind, and both are messages: one impl each, by type.
            "compareTo": [
                member("semver_compare", semver_t, [semver_t], t.INT, lambda a, b: _sign(order(a, b))),
                cel.Overload("quantity_compare", t.INT, [quantity_t, quantity_t], is_member=True),
            ],
            "isGreaterThan": [
                member("semver_greater", semver_t, [semver_t], t.BOOL, lambda a, b: order(a, b) > 0),
                cel.Overload("quantity_greater", t.BOOL, [quantity_t, quantity_t], is_member=True),
            ],
            "isLessThan": [
                member("semver_less", semver_t, [semver_t], t.BOOL, lambda a, b: order(a, b) < 0),
                cel.Overload("quantity_less", t.BOOL, [quantity_t, quantity_t], is_member=True),
            ],
            "add": [
                member("quantity_add", quantity_t, [quantity_t], quantity_t, lambda a, b: q_of(qv(a) + qv(b))),
                member("quantity_add_int", quantity_t, [t.INT], quantity_t, lambda a, b: q_of(qv(a) + b)),
            ],
            "sub": [
                member("quantity_sub", quantity_t, [quantity_t], quantity_t, lambda a, b: q_of(qv(a) - qv(b))),
                member("quantity_sub_int", quantity_t, [t.INT], quantity_t, lambda a, b: q_of(qv(a) - b)),
            ],
            "isInteger": [member("quantity_is_integer", quantity_t, [], t.BOOL, lambda a: qv(a).denominator == 1)],
            "asInteger": [member("quantity_as_integer", quantity_t, [], t.INT, lambda a: _as_integer(qv(a)))],
            "asApproximateFloat": [member("quantity_as_float", quantity_t, [], t.DOUBLE, lambda a: float(qv(a)))],
            "sign": [member("quantity_sign", quantity_t, [], t.INT, lambda a: _sign(qv(a)))],
        }  # fmt: skip
        functions = [cel.FunctionDecl(name, decls) for name, decls in overloads.items()]
        self.env = cel.NewEnv(pool, variables={"device": t.Map(t.STRING, t.DYN)}, functions=functions)


def _as_integer(value: Fraction) -> int:
    if value.denominator != 1 or not -(2**63) <= value < 2**63:
        raise CelError(f"quantity {float(value)} is not an int64")
    return int(value)


# Devices -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DeviceView:
    """What a selector sees of one device: `device` as CEL gets it (attributes and capacity by domain)."""

    driver: str
    data: Mapping[str, Any]


def attribute_value(value: Mapping[str, Any]) -> Any:
    """A ResourceSlice attribute ({string: ..}, {int: ..}, {bool: ..}, {version: ..}) as its CEL value."""
    for kind in ("string", "int", "bool"):
        if kind in value:
            return value[kind]
    if "version" in value:
        text = str(value["version"])
        parse_semver(text)
        return _runtime().semver_class(version=text)
    raise CelError(f"attribute {value!r} has no known type")


def device_view(driver: str, device: Mapping[str, Any]) -> DeviceView:
    """A v1-shaped device for CEL: attributes and capacity by domain (unqualified names are the driver's)."""
    runtime = _runtime()
    attributes: dict[str, dict[str, Any]] = {}
    for name, value in (device.get("attributes") or {}).items():
        domain, _, short = name.rpartition("/")
        attributes.setdefault(domain or driver, {})[short] = attribute_value(value)
    capacity: dict[str, dict[str, Any]] = {}
    for name, value in (device.get("capacity") or {}).items():
        domain, _, short = name.rpartition("/")
        text = str(value["value"])
        parse_quantity(text)
        capacity.setdefault(domain or driver, {})[short] = runtime.quantity_class(value=text)
    return DeviceView(driver, {"driver": driver, "attributes": attributes, "capacity": capacity})


# Selectors -----------------------------------------------------------------------------------------


def estimated_cost(expression: str) -> int:
    """An upper bound in the spirit of Kubernetes' estimate: one unit per token, and each macro's body
    multiplied by the most entries its collection can have (nested macros multiply)."""
    cost, depth = 0, 0
    stack: list[bool | None] = []  # per open "(": a macro body (True), a plain one (False); None: a macro's next
    tokens = _TOKEN.findall(expression)
    for index, token in enumerate(tokens):
        cost += MAX_COLLECTION**depth
        if token in MACROS and index > 0 and tokens[index - 1] == "." and tokens[index + 1 : index + 2] == ["("]:
            stack.append(None)  # the next "(" opens a macro body
        elif token == "(":
            macro = bool(stack) and stack[-1] is None
            if macro:
                stack[-1] = True
                depth += 1
            else:
                stack.append(False)
        elif token == ")" and stack and stack.pop():
            depth -= 1
    return cost


class Selector:
    """One compiled selector: called on a DeviceView, True or False; CelError when it fails on the device."""

    def __init__(self, expression: str) -> None:
        if len(expression) > MAX_EXPRESSION:
            raise CelError(f"expression is {len(expression)} characters; at most {MAX_EXPRESSION} are allowed")
        cost = estimated_cost(expression)
        if cost > MAX_COST:
            raise CelError(f"expression's estimated cost {cost} exceeds the limit of {MAX_COST}")
        runtime = _runtime()
        try:
            self._program = runtime.env.compile(expression)
        except RuntimeError as exc:
            raise CelError(_one_line(str(exc))) from exc
        result = self._program.return_type().name()
        if result not in ("bool", "BOOL", "dyn", "DYN"):
            raise CelError(f"a selector must be a bool expression, this one is {result}")
        self.expression = expression
        # Kubernetes answers an empty map for a domain the device has no attributes or capacity in.
        self._domains = {(kind, a or b) for kind, a, b in _DOMAIN_LOOKUP.findall(expression)}

    def __call__(self, view: DeviceView) -> bool:
        data = dict(view.data)
        for kind, domain in self._domains:
            if domain not in data[kind]:
                data[kind] = {**data[kind], domain: {}}
        value = self._program.eval(data={"device": data})
        kind = value.type().name()
        if kind in ("ERROR", "error"):
            raise CelError(f"{self.expression!r}: {_one_line(str(value.value()))}")
        result = value.value()
        if not isinstance(result, bool):
            raise CelError(f"{self.expression!r}: evaluated to {kind}, not bool")
        return result


def _one_line(text: str) -> str:
    return " ".join(text.split())


def compile_selector(expression: str) -> Selector:
    """Compile once (CelError for a compile error, a non-bool type, too long or too costly); call per device."""
    return Selector(expression)


def matches(expression: str, device: DeviceView) -> bool:
    return compile_selector(expression)(device)
