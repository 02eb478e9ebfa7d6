"""What several commands' options share (only commands/ and cli.py see argparse).

The types of the numeric and size options, which refuse a bad value at parse time (exit 2,
the option named, before anything is built or booted), in units' one grammar of sizes;
--linux, the same on every command that takes a kernel; and the guest options (vm.GuestRequest),
the same on every command that boots a guest.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from meminit.core import hostinfo, kernels, units
from meminit.guest import vm
from meminit.core.errors import MeminitError
from meminit.core.kernels import Linux
from meminit.kernel import own_tree


# ---------------------------------------------------------------- --linux

def add_linux_option(p: argparse.ArgumentParser, rfc: bool = True) -> None:
    """--linux VERSION, the same on every command that takes a kernel, and (`rfc`) --rfc NAMES,
    the opt-in parts of its series to apply besides the default stack."""
    p.add_argument("--linux", choices=sorted(kernels.KERNELS), default=kernels.DEFAULT.version, type=str,
                   help=f"which kernel and its series (default {kernels.DEFAULT.version}, the LTS; "
                        f"{kernels.MAINLINE.version} is the mainline-track series)")
    if rfc:
        p.add_argument("--rfc", type=rfc_names, default=(), metavar="NAMES",
                       help="also apply these RFC parts of the series, comma-separated (e.g. threads,auto: "
                            "patches/VERSION/rfc/NAME/, on the core; default: none, the core, its topics "
                            "and test-only)")


def rfc_names(text: str) -> tuple[str, ...]:
    """--rfc's comma-separated part names ('threads,auto' or 'rfc/threads'); checked against the
    kernel's parts when its tree is prepared."""
    names = tuple(n.strip().removeprefix("rfc/") for n in text.split(",") if n.strip())
    if not names or not all(n.replace("-", "").replace("_", "").isalnum() for n in names):
        raise argparse.ArgumentTypeError(f"wants comma-separated RFC part names such as threads,auto, got {text!r}")
    return names


def linux_from(args: argparse.Namespace) -> Linux:
    linux = kernels.KERNELS[getattr(args, "linux", None) or kernels.DEFAULT.version]
    return linux.with_rfcs(getattr(args, "rfc", ()) or ())


def add_tree_options(p: argparse.ArgumentParser, what: str) -> None:
    """--tree DIR, --base REV, --series REV: a kernel git tree of the user's own (own_tree);
    --linux then defaults to the kernel nearest the tree's Makefile version."""
    p.add_argument("--tree", metavar="DIR",
                   help=f"a kernel git tree of your own to {what} instead of the Debian source and "
                        "patches/ (never written to: its commits are checked out under work/own/); "
                        "needs --base; its config fragments are those of --linux, by default of the "
                        "nearest kernel meminit knows")
    p.add_argument("--base", metavar="REV", help="--tree: the commit the base kernel is built from")
    p.add_argument("--series", metavar="REV", help="--tree: the commit the series kernel is built from "
                                                   "(default HEAD)")
    # --linux's default depends on --tree; None: not given
    p.set_defaults(linux=None, parser=p)


def tree_from(args: argparse.Namespace) -> own_tree.OwnTree | None:
    """The --tree request, or None; --base and --series without --tree, and --tree without
    --base, are usage errors."""
    if args.tree:
        if getattr(args, "rfc", ()):
            refuse(args, "--rfc picks parts of patches/VERSION/; --tree DIR is your own tree, whose commits are its parts")
        if not args.base:
            refuse(args, "--tree DIR needs --base REV, the commit to compare against")
        return own_tree.OwnTree(Path(args.tree), base=args.base, series=args.series or "HEAD",
                                config_of=args.linux)
    if args.base or args.series:
        refuse(args, f"{'--base' if args.base else '--series'} names a commit of --tree DIR, which is missing")
    return None


def refuse(args: argparse.Namespace, message: str) -> NoReturn:
    """A combination of options argparse cannot check itself, refused as argparse refuses a
    bad value (usage, the message, exit 2): the command's parser, set as its `parser` default."""
    parser: argparse.ArgumentParser | None = getattr(args, "parser", None)
    if parser is None:
        raise MeminitError(message)
    parser.error(message)


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


def margin_denominator(maximum: int = 64) -> OptionType:
    """N of a margin of 1/N: from 2 to `maximum`, or 0 for no such margin."""
    return OptionType("integer", f"0 (none) or an integer from 2 to {maximum}", int,
                      lambda n: n == 0 or 2 <= n <= maximum)


def number(zero: str = "") -> OptionType:
    """A finite decimal number above 0, or 0 too when `zero` says what 0 means."""
    accepts = _noted("a number of 0 or more", zero) if zero else "a number above 0"
    return OptionType("number", accepts, float,
                      lambda x: math.isfinite(x) and (x >= 0 if zero else x > 0))


def size(multiple: int = 1, minimum: int = 1, maximum: int | None = None, most: str = "") -> OptionType:
    """A size in bytes (16M, 1.5G, 4096), at least `minimum`, a multiple of `multiple`, at
    most `maximum` (`most` says what that is)."""
    accepts = "a size such as 16M, 1.5G or 4096"
    if multiple > 1:
        accepts = f"a size that is a positive multiple of {units.format_size(multiple)}"
    if minimum > 1:
        accepts += f", at least {units.format_size(minimum)}"
    if minimum == 0:
        accepts += ", or 0"
    if maximum is not None:
        accepts += f", at most {units.format_size(maximum)}{f' ({most})' if most else ''}"
    return OptionType("size", accepts, lambda text: units.parse_size(text, minimum),
                      lambda n: n % multiple == 0 and (maximum is None or n <= maximum))


def guest_memory() -> OptionType:
    """A guest's memory: a multiple of 1M, at most this machine's memory (QEMU would fail
    only once the packages are installed, the source unpacked and the kernels built)."""
    total = hostinfo.memory_bytes()
    return size(multiple=units.MIB, maximum=None if total is None else total // units.MIB * units.MIB,
                most="this machine's memory")


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


# ---------------------------------------------------------------- guests

GUEST_OPTIONS = ("accel", "cpus", "memory", "append")


def add_guest_options(p: argparse.ArgumentParser, *names: str, timeout: int | None = None,
                      timeout_help: str | None = None) -> None:
    """vm.GuestRequest's options `names` in that order (default GUEST_OPTIONS; "timeout", whose
    default is the command's own `timeout`, only when named: the commands that take it put it
    before their -j)."""
    defaults = vm.GuestRequest()
    specs: dict[str, dict[str, Any]] = {
        "accel": dict(choices=["auto", "kvm", "tcg"], default=defaults.accel,
                      help="QEMU accelerator (default: KVM if a trial guest boots, else TCG)"),
        "cpus": dict(type=integer(), default=defaults.cpus, help=f"guest CPUs (default {defaults.cpus})"),
        "memory": dict(type=guest_memory(), default=defaults.memory,
                       help="guest memory, e.g. 8G, a multiple of 1M (default: what the scenario needs)"),
        "append": dict(action="append", default=[], metavar="PARAM", help="extra kernel parameter (repeatable)"),
        "timeout": dict(type=integer(), default=timeout,
                        help=timeout_help or f"guest timeout in seconds (default {timeout})"),
    }
    for name in names or GUEST_OPTIONS:
        p.add_argument(f"--{name}", **specs[name])


def guest_from(args: argparse.Namespace) -> vm.GuestRequest:
    """The guest request of a command's options; what the command does not offer, the default."""
    return vm.GuestRequest(**{f.name: getattr(args, f.name) for f in dataclasses.fields(vm.GuestRequest)
                              if hasattr(args, f.name)})
