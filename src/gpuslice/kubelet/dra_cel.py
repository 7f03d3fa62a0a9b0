"""A small subset of CEL for device selectors, enough for DeviceClasses and claims (see docs/kubelet-mock.md).

Supported: `device.driver`; `device.attributes['<domain>'].<name>` and `device.capacity['<domain>'].<name>`;
`'<name>' in device.attributes['<domain>']`; string, int and bool literals; `quantity('1Gi')`, `semver('1.2.3')`;
`== != < <= > >=`; `x.compareTo(y)`; `&& || !` and parentheses. An attribute the device does not have is an
error (as in CEL), so guard optional ones with `in`. Expressions are limited to 10 KiB, as the API server does.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

MAX_EXPRESSION = 10 * 1024
_TOKEN = re.compile(
    r"\s*(?:(?P<string>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")|(?P<number>-?\d+)|(?P<op>==|!=|<=|>=|&&|\|\||[<>!()\[\].,])"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*))"
)
_QUANTITY = re.compile(r"(\d+)(|k|M|G|T|Ki|Mi|Gi|Ti)")
_FACTORS = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


class CelError(ValueError):
    """An expression outside the subset, or one that fails on a device; the message says where."""


@dataclass(frozen=True, order=True)
class Version:
    parts: tuple[int, int, int]


@dataclass(frozen=True)
class DeviceView:
    """What a selector sees: the driver, and attributes and capacity by domain (values already typed)."""

    driver: str
    attributes: Mapping[str, Mapping[str, Any]]
    capacity: Mapping[str, Mapping[str, int]]


def quantity(text: str) -> int:
    match = _QUANTITY.fullmatch(text.strip())
    if match is None:
        raise CelError(f"quantity {text!r}: only whole numbers with k/M/G/T/Ki/Mi/Gi/Ti suffixes are supported")
    return int(match[1]) * _FACTORS[match[2]]


def semver(text: str) -> Version:
    match = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", text.strip())
    if match is None:
        raise CelError(f"semver {text!r}: expected MAJOR.MINOR.PATCH")
    return Version((int(match[1]), int(match[2]), int(match[3])))


def typed_attribute(value: Mapping[str, Any]) -> Any:
    """A ResourceSlice attribute ({string: ..}, {int: ..}, {bool: ..}, {version: ..}) as a Python value."""
    for kind in ("string", "int", "bool"):
        if kind in value:
            return value[kind]
    if "version" in value:
        return semver(str(value["version"]))
    raise CelError(f"attribute {value!r} has no known type")


def device_view(driver: str, device: Mapping[str, Any]) -> DeviceView:
    """Group a v1-shaped device's attributes and capacity by domain (unqualified names are the driver's)."""
    attributes: dict[str, dict[str, Any]] = {}
    for name, value in (device.get("attributes") or {}).items():
        domain, _, short = name.rpartition("/")
        attributes.setdefault(domain or driver, {})[short] = typed_attribute(value)
    capacity: dict[str, dict[str, int]] = {}
    for name, value in (device.get("capacity") or {}).items():
        domain, _, short = name.rpartition("/")
        capacity.setdefault(domain or driver, {})[short] = quantity(str(value["value"]))
    return DeviceView(driver, attributes, capacity)


Evaluator = Callable[[DeviceView], Any]


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[tuple[str, str]] = []
        position = 0
        while position < len(text):
            match = _TOKEN.match(text, position)
            if match is None or match.end() == position:
                if text[position:].strip() == "":
                    break
                raise CelError(f"unexpected {text[position : position + 10]!r} at offset {position}")
            kind = match.lastgroup
            assert kind is not None
            self.tokens.append((kind, match[kind]))
            position = match.end()
        self.position = 0

    def peek(self) -> str | None:
        return self.tokens[self.position][1] if self.position < len(self.tokens) else None

    def take(self, expected: str | None = None) -> tuple[str, str]:
        if self.position >= len(self.tokens):
            raise CelError(f"unexpected end of expression{f', expected {expected!r}' if expected else ''}")
        token = self.tokens[self.position]
        if expected is not None and token[1] != expected:
            raise CelError(f"expected {expected!r}, got {token[1]!r}")
        self.position += 1
        return token

    def parse(self) -> Evaluator:
        result = self.disjunction()
        if self.position != len(self.tokens):
            raise CelError(f"unexpected {self.tokens[self.position][1]!r}")
        return result

    def disjunction(self) -> Evaluator:
        left = self.conjunction()
        while self.peek() == "||":
            self.take()
            right = self.conjunction()
            left = (lambda a, b: lambda d: _bool(a(d)) or _bool(b(d)))(left, right)
        return left

    def conjunction(self) -> Evaluator:
        left = self.unary()
        while self.peek() == "&&":
            self.take()
            right = self.unary()
            left = (lambda a, b: lambda d: _bool(a(d)) and _bool(b(d)))(left, right)
        return left

    def unary(self) -> Evaluator:
        if self.peek() == "!":
            self.take()
            inner = self.unary()
            return lambda d: not _bool(inner(d))
        return self.comparison()

    def comparison(self) -> Evaluator:
        left = self.postfix()
        op = self.peek()
        if op in ("==", "!=", "<", "<=", ">", ">="):
            self.take()
            right = self.postfix()
            return _compare(op, left, right)
        if op == "in":
            self.take()
            container = self.postfix()
            return lambda d: _contains(container(d), left(d))
        return left

    def postfix(self) -> Evaluator:
        value = self.primary()
        while self.peek() in (".", "["):
            if self.take()[1] == "[":
                key = self.postfix()
                self.take("]")
                value = (lambda v, k: lambda d: _index(v(d), k(d)))(value, key)
                continue
            kind, name = self.take()
            if kind != "name":
                raise CelError(f"expected a field name after '.', got {name!r}")
            if name == "compareTo" and self.peek() == "(":
                self.take("(")
                other = self.disjunction()
                self.take(")")
                value = (lambda v, o: lambda d: _compare_to(v(d), o(d)))(value, other)
            else:
                value = (lambda v, n: lambda d: _field(v(d), n))(value, name)
        return value

    def primary(self) -> Evaluator:
        kind, token = self.take()
        if kind == "string":
            text = token[1:-1].encode().decode("unicode_escape")
            return lambda d: text
        if kind == "number":
            number = int(token)
            return lambda d: number
        if token == "(":
            inner = self.disjunction()
            self.take(")")
            return inner
        if kind == "name":
            if token in ("true", "false"):
                flag = token == "true"
                return lambda d: flag
            if token == "device":
                return lambda d: d
            if token in ("quantity", "semver") and self.peek() == "(":
                self.take("(")
                arg_kind, arg = self.take()
                self.take(")")
                if arg_kind != "string":
                    raise CelError(f"{token}() takes a string literal")
                constant = quantity(arg[1:-1]) if token == "quantity" else semver(arg[1:-1])
                return lambda d: constant
        raise CelError(f"unsupported token {token!r} (see the supported subset)")


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise CelError(f"expected a bool, got {value!r}")
    return value


def _field(value: Any, name: str) -> Any:
    if isinstance(value, DeviceView):
        if name == "driver":
            return value.driver
        if name == "attributes":
            return value.attributes
        if name == "capacity":
            return value.capacity
        raise CelError(f"device has no field {name!r}")
    if isinstance(value, Mapping):
        if name not in value:
            raise CelError(f"no such key: {name}")
        return value[name]
    raise CelError(f"cannot select {name!r} from {value!r}")


def _index(value: Any, key: Any) -> Any:
    if not isinstance(value, Mapping):
        raise CelError(f"cannot index {value!r}")
    return value.get(key, {})  # an unknown domain is an empty map, as in Kubernetes


def _contains(container: Any, key: Any) -> bool:
    if not isinstance(container, Mapping):
        raise CelError("'in' needs a map on its right")
    return key in container


def _compare_to(left: Any, right: Any) -> int:
    if type(left) is not type(right):
        raise CelError(f"compareTo: {left!r} and {right!r} differ in type")
    return int(left > right) - int(left < right)


def _compare(op: str, left: Evaluator, right: Evaluator) -> Evaluator:
    def evaluate(device: DeviceView) -> bool:
        a, b = left(device), right(device)
        if op in ("==", "!="):
            if type(a) is not type(b):
                raise CelError(f"no such overload: {a!r} {op} {b!r}")
            return bool(a == b) == (op == "==")
        if type(a) is not type(b) or isinstance(a, bool):
            raise CelError(f"no such overload: {a!r} {op} {b!r}")
        return bool({"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op])

    return evaluate


def compile_selector(expression: str) -> Evaluator:
    """Parse once; the result evaluates on a DeviceView. CelError for anything outside the subset."""
    if len(expression) > MAX_EXPRESSION:
        raise CelError(f"expression is {len(expression)} characters; at most {MAX_EXPRESSION} are allowed")
    return _Parser(expression).parse()


def matches(expression: str, device: DeviceView) -> bool:
    return _bool(compile_selector(expression)(device))
