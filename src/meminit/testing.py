"""`meminit test`: the project's tests (pytest), including the kernel build + boot + KUnit test."""

from __future__ import annotations

import argparse
import os
import sys

from meminit import kernels, paths, proc
from meminit.commands import options
from meminit.errors import MeminitError


def pytest_command(quick: bool, extra: list[str], long: bool = False) -> list[str]:
    """pytest's command line; `extra` is what followed `meminit test`, a leading `--` dropped
    (argparse's REMAINDER keeps it, and pytest would take it for a file name). `long` adds
    the long guest tests (tests/conftest.py's LONG_FIXTURES), which skip otherwise."""
    if extra[:1] == ["--"]:
        extra = extra[1:]
    # tee-sys: the kernel build and boot print progress while pytest still captures it.
    cmd = [sys.executable, "-m", "pytest", "-ra", "--capture=tee-sys", str(paths.REPO / "tests")]
    if quick:
        cmd += ["-m", "not kernel"]
    if long:
        cmd.append("--long")
    return cmd + extra


def _cmd_test(args: argparse.Namespace) -> int:
    linux = options.linux_from(args)
    if args.quick and args.long:
        raise MeminitError("--quick skips every guest, --long adds guests: pick one")
    cmd = pytest_command(args.quick, args.pytest_args, args.long)
    what = "unit tests" if args.quick else \
        f"unit tests, then the kernel build/boot/KUnit tests on Linux {linux.version}"
    if args.long:
        what += ", with the long guest tests (soak, selftests, measure, package)"
    print(f"meminit: running {what}: {' '.join(cmd[2:])}", file=sys.stderr, flush=True)
    env = dict(os.environ, PYTHONUNBUFFERED="1", **{kernels.ENV: linux.version})
    return proc.interactive(cmd, cwd=paths.REPO, env=env)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("test", help="run the tests (pytest; builds and boots the series kernel)")
    p.add_argument("--quick", action="store_true", help="skip tests that build or boot a kernel")
    p.add_argument("--long", action="store_true",
                   help="also boot the long commands' guests (soak, mm selftests, measure, package): "
                        "before a submission; CI skips them")
    options.add_linux_option(p)
    p.add_argument("pytest_args", nargs=argparse.REMAINDER, help="extra pytest arguments after --")
    p.set_defaults(func=_cmd_test)
