"""`meminit package`: Debian packages of the series (package.py)."""

from __future__ import annotations

import argparse

from meminit.core import kernels
from meminit.kernel import package
from meminit.commands import options


def _cmd_package(args: argparse.Namespace) -> int:
    if options.linux_from(args) != kernels.DEFAULT:
        options.refuse(args, f"package serves Linux {kernels.DEFAULT.version} only: its packages are what a "
                             f"user of Debian's {kernels.DEFAULT.version} kernel installs (its version, "
                             f"Debian's linux-config-{kernels.DEFAULT.version}); the {args.linux} series "
                             f"is built and booted by run, test and boot --linux {args.linux}")
    package.package(args.config, args.jobs, with_series=not args.base)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("package", help="build Debian packages (linux-image, linux-headers) of the series")
    p.add_argument("--config", default="meminit", metavar="meminit|debug|debian|FILE",
                   help="meminit: the run kernels' trimmed config (default; boots QEMU guests, few real "
                        "machines); debug: the test command's; debian: Debian's amd64 config from "
                        "linux-config-6.12 with the series' options; or a config file")
    p.add_argument("--base", action="store_true",
                   help="the pristine source with the same config, no series: the base line to measure against")
    p.add_argument("-j", "--jobs", type=options.integer(), help="build jobs (default: CPUs)")
    options.add_linux_option(p, rfc=False)
    p.set_defaults(func=_cmd_package, parser=p)
