"""`meminit check-injections`: the committed injected bugs, each built and booted (injections.py)."""

from __future__ import annotations

import argparse

from meminit.core.tables import render_table
from meminit.guest import injections
from meminit.commands import options


def _cmd_check_injections(args: argparse.Namespace) -> int:
    linux = options.linux_from(args)
    outcomes = injections.check(linux, injections.of(linux, tuple(args.names)), options.guest_from(args),
                                args.jobs)
    print(render_table(["injection", "caught", "what it breaks", "expected cases"],
                       [[o.injection.name, "yes" if o.caught else "NO", o.injection.what, o.how] for o in outcomes]))
    missed = [o.injection.name for o in outcomes if not o.caught]
    print(f"{len(outcomes) - len(missed)} of {len(outcomes)} injections caught"
          + (f"; not caught: {', '.join(missed)}" if missed else ""))
    return 1 if missed else 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check-injections",
                       help="apply each committed injected bug (tests/injections/VERSION/) to a scratch tree, "
                            "build and boot it, and expect its KUnit cases to fail")
    p.add_argument("names", nargs="*", metavar="NAME", help="the injections to run (default: all of the kernel's made for the stack: "
                        "the default one, or with --rfc those of the RFC parts named)")
    options.add_linux_option(p)
    options.add_guest_options(p, "accel", "memory", "timeout", timeout=1800)
    p.add_argument("-j", "--jobs", type=options.integer(), help="build jobs (default: CPUs)")
    p.set_defaults(func=_cmd_check_injections)
