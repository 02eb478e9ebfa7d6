"""`meminit check-configs`: the series' KUnit suites on other architectures (configs.py) and the
compile targets (compile_checks.py)."""

from __future__ import annotations

import argparse

from meminit.core import kernels
from meminit.guest import configs, kunit_modules
from meminit.kernel import compile_checks
from meminit.commands import options


def _cmd_check_configs(args: argparse.Namespace) -> int:
    linux = options.linux_from(args)
    configs.check_configs(configs.expand_targets(args.targets, linux), args.jobs, linux)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check-configs",
                       help="build and run the series' KUnit suites on ARCH=um, arm64, i386 and "
                            "x86-64 without a virtual memmap (kunit.py); compile the touched "
                            "directories under Debian's config, allnoconfig, allmodconfig, riscv64")
    p.add_argument("targets", nargs="*", metavar="TARGET",
                   help=f"KUnit: {', '.join(configs.TARGETS)} (group 'kunit', the default: "
                        f"{', '.join(configs.groups()['kunit'])}; 7.3: "
                        f"{', '.join(configs.groups(kernels.MAINLINE)['kunit'])}); "
                        f"{kunit_modules.NAME} (a KUNIT=m kernel, the core's suites loaded as modules); compile only: "
                        f"{', '.join(compile_checks.COMPILE_TARGETS)} (group 'compile'); 'all' for both")
    p.add_argument("-j", "--jobs", type=options.integer(), help="parallel jobs (default: number of CPUs)")
    options.add_linux_option(p)
    p.set_defaults(func=_cmd_check_configs)
