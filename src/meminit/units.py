"""Sizes: the one grammar every option and table uses (binary K/M/G/T, whole bytes); and the
argparse types of the numeric and size options, which refuse a bad value at parse time (exit 2,
the option named, before anything is built or booted)."""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any

from meminit.errors import MeminitError

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


# ---------------------------------------------------------------- option types

class OptionType:
    """An argparse `type=`: reads the text with `read` and keeps what `fits`; anything else
    (unreadable, out of range, the read's own MeminitError) is argparse's error, which names
    the option and says what it `accepts`. `kind` tells tests what sort of value it is."""

    def __init__(self, kind: str, accepts: str, read: Callable[[str], Any],
                 fits: Callable[[Any], bool] = lambda _value: True, explain: bool = False):
        self.kind, self.accepts, self.read, self.fits, self.explain = kind, accepts, read, fits, explain
        self.__name__ = kind  # what argparse calls the type in its own messages

    def __call__(self, text: str) -> Any:
        try:
            value = self.read(text)
        except (ValueError, ArithmeticError, MeminitError) as exc:
            if self.explain and isinstance(exc, MeminitError):
                raise argparse.ArgumentTypeError(f"wants {self.accepts}: {exc}") from None
            raise argparse.ArgumentTypeError(f"wants {self.accepts}, got {text!r}") from None
        if not self.fits(value):
            raise argparse.ArgumentTypeError(f"wants {self.accepts}, got {text!r}")
        return value


def _noted(accepts: str, note: str) -> str:
    return f"{accepts} ({note})" if note else accepts


def integer(minimum: int = 1, maximum: int | None = None, note: str = "") -> OptionType:
    """A whole number from `minimum` (by default 1) to `maximum`; `note` says what an edge
    value means, e.g. '0: off'."""
    accepts = (f"an integer of {minimum} or more" if maximum is None
               else f"an integer from {minimum} to {maximum}")
    return OptionType("integer", _noted(accepts, note), int,
                      lambda n: n >= minimum and (maximum is None or n <= maximum))


def number(zero: str = "") -> OptionType:
    """A finite decimal number above 0, or 0 too when `zero` says what 0 means."""
    accepts = _noted("a number of 0 or more", zero) if zero else "a number above 0"
    return OptionType("number", accepts, float,
                      lambda x: math.isfinite(x) and (x >= 0 if zero else x > 0))


def size(multiple: int = 1, minimum: int = 1) -> OptionType:
    """A size in bytes (16M, 1.5G, 4096), at least `minimum`, a multiple of `multiple`."""
    accepts = "a size such as 16M, 1.5G or 4096"
    if multiple > 1:
        accepts = f"a size that is a positive multiple of {format_size(multiple)}"
    if minimum > 1:
        accepts += f", at least {format_size(minimum)}"
    return OptionType("size", accepts, lambda text: parse_size(text, max(minimum, 1)),
                      lambda n: n % multiple == 0)


def listed(item: OptionType) -> OptionType:
    """Comma-separated values of `item` (empty ones skipped, at least one): a list."""
    def read(text: str) -> list:
        values = [item.read(word) for word in text.split(",") if word.strip()]
        if not values or not all(map(item.fits, values)):
            raise ValueError(text)
        return values
    return OptionType(f"{item.kind} list", f"a comma-separated list, each {item.accepts}", read)


def as_text(check: OptionType) -> OptionType:
    """`check`'s values, kept as the text the user typed (for an option a tool reads itself)."""
    def read(text: str) -> str:
        check(text)
        return text
    return OptionType(check.kind, check.accepts, read)


def explained(read: Callable[[str], Any], kind: str, accepts: str) -> OptionType:
    """An existing reader as an option type: its MeminitError, told after what the option accepts."""
    return OptionType(kind, accepts, read, explain=True)
