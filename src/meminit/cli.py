"""Thin command-line front end: each subcommand lives in the module of its concern."""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
from types import FrameType

from meminit.core.errors import MeminitError

# Modules that contribute subcommands through register(subparsers).
COMMAND_MODULES = [
    "meminit.commands.kernel",
    "meminit.commands.check_configs",
    "meminit.commands.check_injections",
    "meminit.commands.boot",
    "meminit.commands.run",
    "meminit.commands.measure",
    "meminit.commands.package",
    "meminit.commands.report",
    "meminit.commands.test",
    "meminit.commands.microbench",
    "meminit.commands.bench_results",
    "meminit.commands.maple_bench",
    "meminit.commands.soak",
    "meminit.commands.selftests",
]


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="meminit",
        description="Build, boot, test and measure the meminit series (Linux 6.12 LTS and 7.3).",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """parse_args, and the options a command takes by prefix (`measure`'s
    --i-know-this-erases-NAME) in args.dynamic_options, NAME only."""
    args, extra = parser.parse_known_args(argv)
    prefix = getattr(args, "dynamic_option_prefix", None)
    stray = [a for a in extra if not (prefix and a.startswith(prefix) and len(a) > len(prefix))]
    if stray:
        parser.error(f"unrecognized arguments: {' '.join(stray)}")
    args.dynamic_options = [a[len(prefix):] for a in extra] if prefix else []
    return args


def _terminated(signum: int, _frame: FrameType | None) -> None:
    """SIGTERM (a CI timeout, `kill`) unwinds like Ctrl-C, so that what a command must put
    back (check-series' tree at the series head, measure's devices) is put back."""
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    args = parse(make_parser(), argv)
    previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        return int(args.func(args) or 0)
    except MeminitError as exc:
        print(f"meminit: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("meminit: interrupted", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
