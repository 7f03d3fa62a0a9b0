"""Kubernetes quantities with decimals (`500m`, `1.5`, `2Gi`, `1e3`) as milli-units or MiB, rounded up."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from gpuslice.dra.quantity import MAX_QUANTITY_TEXT, QuantityError

_SUFFIXES = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}
_QUANTITY = re.compile(
    r"\+?([0-9]{0,30}(?:\.[0-9]{0,30})?)(?:([eE][+-]?[0-9]{1,2})|(n|u|m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?)"
)
_MAX_AMOUNT = Decimal(10) ** 24  # far past any node (an exabyte of memory is 1e18)
_MIB = Decimal(2**20)


def quantity(text: object) -> Decimal:
    """`500m` -> 0.5, `2Gi` -> 2147483648, `1e3` -> 1000 (the API server's grammar, bounded)."""
    if isinstance(text, bool) or not isinstance(text, str | int):
        raise QuantityError(f"expected a quantity such as 500m or 2Gi, got {str(text)[:MAX_QUANTITY_TEXT]!r}")
    if isinstance(text, int):
        value = Decimal(text)
    else:
        if len(text) > MAX_QUANTITY_TEXT:
            raise QuantityError(f"quantity {text[:MAX_QUANTITY_TEXT]!r}... is longer than {MAX_QUANTITY_TEXT}")
        match = _QUANTITY.fullmatch(text.strip())
        if match is None or match[1] in ("", "."):
            raise QuantityError(f"expected a quantity such as 500m or 2Gi, got {text!r}")
        try:
            value = Decimal(match[1]) * (Decimal(f"1{match[2]}") if match[2] else _SUFFIXES[match[3] or ""])
        except InvalidOperation:
            raise QuantityError(f"expected a quantity such as 500m or 2Gi, got {text!r}") from None
    if value < 0 or value > _MAX_AMOUNT:
        raise QuantityError(f"quantity {text!r} is out of range (0 to 1e24)")
    return value


def milli(text: object) -> int:
    """A quantity in milli-units, rounded up (CPU: `500m` -> 500, `2` -> 2000)."""
    return int(-(-quantity(text) * 1000 // 1))


def mebibytes(text: object) -> int:
    """A byte quantity in MiB, rounded up (`1Gi` -> 1024, `1G` -> 954)."""
    return int(-(-quantity(text) // _MIB))


def count(text: object) -> int:
    """A whole count (extended resources such as nvidia.com/gpu); a fraction is refused."""
    value = quantity(text)
    if value != value.to_integral_value():
        raise QuantityError(f"a device count must be whole, got {text!r}")
    return int(value)
