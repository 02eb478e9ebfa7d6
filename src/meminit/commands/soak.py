"""`meminit soak`: bind/unbind cycles of the memmap scenarios on the debug kernel (soak.py)."""

from __future__ import annotations

import argparse

from meminit.core import units
from meminit.scenarios import soak
from meminit.commands import options
from meminit.core.errors import MeminitError
from meminit.scenarios import memmap as memmap_scenarios


def request_from(args: argparse.Namespace) -> soak.SoakRequest:
    return soak.SoakRequest(scenarios=args.scenario or list(memmap_scenarios.BY_NAME), cycles=args.cycles,
                            pmem_size=args.pmem_size, hotplug=not args.no_hotplug,
                            inject=not args.no_faults, linux=options.linux_from(args),
                            guest=options.guest_from(args))


def _cmd_soak(args: argparse.Namespace) -> int:
    outcome = soak.run(request_from(args), args.jobs)
    if outcome.problems:
        raise MeminitError("soak failed:\n  " + "\n  ".join(outcome.problems))
    print("soak passed")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("soak", help="bind/unbind cycles on the debug kernel: same struct pages, "
                                    "no splat, no leak, CPU hotplug and injected faults survived")
    options.add_linux_option(p)
    p.add_argument("--cycles", type=options.integer(), default=soak.DEFAULT_CYCLES,
                   help=f"cycles per scenario (default {soak.DEFAULT_CYCLES}; `test --long` runs {soak.SHORT_CYCLES})")
    p.add_argument("--scenario", action="append", choices=list(memmap_scenarios.BY_NAME),
                   help="scenario to soak (repeatable; default: all of them)")
    p.add_argument("--pmem-size", type=options.size(multiple=128 * units.MIB), default=soak.DEFAULT_PMEM,
                   help=f"emulated pmem size (default {units.format_size(soak.DEFAULT_PMEM)}; multiple of 128M)")
    p.add_argument("--no-hotplug", action="store_true", help="do not offline/online CPU 1 meanwhile")
    p.add_argument("--no-faults", action="store_true", help="do not inject allocation failures")
    options.add_guest_options(p, "timeout", timeout=soak.TIMEOUT_S, timeout_help="guest timeout in seconds")
    p.add_argument("-j", "--jobs", type=options.integer(), help="kernel build jobs (default: CPUs)")
    options.add_guest_options(p, "accel", "cpus", "append")
    p.set_defaults(func=_cmd_soak)
