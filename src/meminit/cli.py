"""Thin command-line front end: each subcommand lives in the module of its concern."""

from __future__ import annotations

import argparse
import importlib
import sys

from meminit.errors import MeminitError

# Modules that contribute subcommands through register(subparsers).
COMMAND_MODULES = [
    "meminit.commands.kernel",
    "meminit.configs",
    "meminit.commands.boot",
    "meminit.commands.run",
    "meminit.commands.measure",
    "meminit.package",
    "meminit.commands.report",
    "meminit.testing",
    "meminit.microbench",
    "meminit.bench_results",
    "meminit.maple_bench",
    "meminit.soak",
    "meminit.selftests",
]


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="meminit",
        description="Build, boot, test and measure the meminit Linux 6.12 series.",
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


def main(argv: list[str] | None = None) -> int:
    args = parse(make_parser(), argv)
    try:
        return int(args.func(args) or 0)
    except MeminitError as exc:
        print(f"meminit: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("meminit: interrupted", file=sys.stderr)
        return 130
