"""`meminit test`: the project's tests (testing.py)."""

from __future__ import annotations

import argparse

from meminit.guest import testing
from meminit.commands import options


def _cmd_test(args: argparse.Namespace) -> int:
    return testing.run_tests(args.quick, args.long, args.pytest_args, options.linux_from(args))


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("test", help="run the tests (pytest; builds and boots the series kernel)")
    p.add_argument("--quick", action="store_true", help="skip tests that build or boot a kernel")
    p.add_argument("--long", action="store_true",
                   help="also boot the kernel under its other preemption model (6.12: none, 7.3: lazy) "
                        "and the long commands' guests (soak, mm selftests, measure, package): "
                        "before a submission; CI skips them")
    options.add_linux_option(p)
    p.add_argument("pytest_args", nargs=argparse.REMAINDER, help="extra pytest arguments after --")
    p.set_defaults(func=_cmd_test)
