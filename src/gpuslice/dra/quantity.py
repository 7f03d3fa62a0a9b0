"""Kubernetes quantities (`1Gi`, `512Mi`, `1G`, `100`) as integers: enough of the grammar for memory limits."""

from __future__ import annotations

import re

_SUFFIXES = {
    "": 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}
_QUANTITY = re.compile(r"([0-9]{1,18})(|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)")
MAX_QUANTITY_TEXT = 32


class QuantityError(ValueError):
    """Text that is not a whole-number quantity with a known suffix."""


def parse_quantity(text: str | int) -> int:
    """`1Gi` -> 1073741824. Whole numbers only (decimal and exponent forms are refused, not rounded)."""
    if isinstance(text, bool):
        raise QuantityError(f"expected a quantity such as 1Gi, got {text!r}")
    if isinstance(text, int):
        if text < 0:
            raise QuantityError(f"a quantity cannot be negative, got {text}")
        return text
    if not isinstance(text, str) or len(text) > MAX_QUANTITY_TEXT:
        raise QuantityError(f"expected a quantity such as 1Gi, got {str(text)[:MAX_QUANTITY_TEXT]!r}")
    match = _QUANTITY.fullmatch(text.strip())
    if match is None:
        raise QuantityError(f"expected a whole-number quantity such as 1Gi or 512Mi, got {text!r}")
    return int(match[1]) * _SUFFIXES[match[2]]
