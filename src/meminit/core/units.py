"""Sizes: the one grammar every option and table uses (binary K/M/G/T, whole bytes). The
options' types that read them at parse time are commands.options'."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from meminit.core.errors import MeminitError

KIB = 1 << 10
MIB = 1 << 20
GIB = 1 << 30

_SHIFT = {"": 0, "K": 10, "M": 20, "G": 30, "T": 40}
_SIZE = re.compile(r"\s*(?P<number>\d+(?:\.\d+)?)\s*(?:(?P<unit>[KMGT])(?:iB|B|i)?|B)?\s*", re.IGNORECASE)


def parse_size(text: str, minimum: int = 1) -> int:
    """'16M', '1.5G', '2GiB', '4096' -> bytes.

    Decimals are fine when they name whole bytes; sizes below `minimum` (by default
    1: every size the commands take is positive) are refused.
    """
    m = _SIZE.fullmatch(text)
    if not m:
        raise MeminitError(f"cannot read size {text!r} (use e.g. 16M, 1.5G, 4096)")
    try:
        value = Decimal(m["number"]) * (1 << _SHIFT[(m["unit"] or "").upper()])
    except InvalidOperation:
        raise MeminitError(f"cannot read size {text!r}") from None
    if value != value.to_integral_value():
        raise MeminitError(f"size {text!r} is not a whole number of bytes")
    if value < minimum:
        raise MeminitError(f"size {text!r} must be positive" if minimum == 1
                           else f"size {text!r} is below {format_size(minimum)}")
    return int(value)


def format_size(n: int) -> str:
    """Bytes in the largest binary unit that divides them: 1G, 32M, 4K, 1000."""
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)
