"""`meminit selftests`: the kernel's mm selftests on base and series, side by side (selftests.py)."""

from __future__ import annotations

import argparse

from meminit.guest import selftests
from meminit.commands import options
from meminit.core.errors import MeminitError


def request_from(args: argparse.Namespace) -> selftests.SelftestsRequest:
    linux = options.linux_from(args)
    return selftests.SelftestsRequest(tests=selftests.fast(linux) if args.fast else selftests.select(args.test, linux),
                                      variants=tuple(args.kernel or selftests.SelftestsRequest.variants),
                                      guest=options.guest_from(args), hugetlb_pages=args.hugetlb_pages,
                                      linux=linux)


def _cmd_selftests(args: argparse.Namespace) -> int:
    request = request_from(args)
    _, problems = selftests.run(request, args.jobs)
    if problems:
        raise MeminitError("selftests failed:\n  " + "\n  ".join(problems))
    print("selftests: the series passes everything base passes" if set(request.variants) == {"base", "series"}
          else f"selftests: every program passed or skipped on {', '.join(request.variants)}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("selftests", help="the kernel's mm selftests (THP, hugetlb, COW, uffd, GUP) "
                                         "on base and series, side by side")
    p.add_argument("test", nargs="*", help="programs to run (default: all of the kernel's: " + "; ".join(
        f"{version}: {', '.join(sorted({t.binary for t in tests}))}" for version, tests in selftests.SELFTESTS.items())
        + ")")
    p.add_argument("--fast", action="store_true", help="only the test command's subset (" + "; ".join(
        f"{version}: {', '.join(t.name for t in tests if t.fast)}" for version, tests in selftests.SELFTESTS.items())
        + ")")
    options.add_linux_option(p)
    p.add_argument("--kernel", action="append", choices=["base", "series", "debug"],
                   help="kernel to run them on (repeatable; default: base and series)")
    p.add_argument("--hugetlb-pages", type=options.integer(0, note="0: none"),
                   default=selftests.SelftestsRequest.hugetlb_pages,
                   help="default-size huge pages reserved first (default: 256 MiB worth, "
                        "as run_vmtests.sh; 0: none)")
    p.add_argument("-j", "--jobs", type=options.integer(), help="build jobs (default: CPUs)")
    options.add_guest_options(p, "accel")
    p.set_defaults(func=_cmd_selftests)
