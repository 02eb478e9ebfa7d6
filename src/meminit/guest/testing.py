"""`meminit test`: the project's tests (pytest), including the kernel build + boot + KUnit test."""

from __future__ import annotations

import os
import sys

from meminit.core import kernels, paths, proc
from meminit.core.errors import MeminitError
from meminit.core.kernels import Linux


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


def run_tests(quick: bool, long: bool, extra: list[str], linux: Linux) -> int:
    """pytest_command() run on the terminal, the kernel tests on `linux`; pytest's exit code."""
    if quick and long:
        raise MeminitError("--quick skips every guest, --long adds guests: pick one")
    cmd = pytest_command(quick, extra, long)
    what = "unit tests" if quick else \
        f"unit tests, then the kernel build/boot/KUnit tests on Linux {linux.version}"
    if long:
        what += ", with the long guest tests (soak, selftests, measure, package)"
    print(f"meminit: running {what}: {' '.join(cmd[2:])}", file=sys.stderr, flush=True)
    env = dict(os.environ, PYTHONUNBUFFERED="1", **{kernels.ENV: linux.version, kernels.RFC_ENV: ",".join(linux.rfcs)})
    return proc.interactive(cmd, cwd=paths.REPO, env=env)
