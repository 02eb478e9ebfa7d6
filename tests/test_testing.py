"""The test command's own command line."""

from __future__ import annotations

import argparse

import pytest

from meminit.guest import testing
from meminit.commands import test as command
from meminit.core.errors import MeminitError


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    command.register(parser.add_subparsers())
    return parser.parse_args(["test", *argv])


def test_arguments_after_the_double_dash_reach_pytest_without_it():
    args = parse(["--quick", "--", "-k", "ktap"])
    cmd = testing.pytest_command(args.quick, args.pytest_args)
    assert cmd[-4:] == ["-m", "not kernel", "-k", "ktap"]
    assert "--" not in cmd


def test_without_extra_arguments_pytest_runs_every_test():
    args = parse([])
    assert testing.pytest_command(args.quick, args.pytest_args)[-1].endswith("tests")


def test_long_adds_the_long_guest_tests_and_refuses_quick(monkeypatch):
    args = parse(["--long", "--", "-k", "soak"])
    assert testing.pytest_command(args.quick, args.pytest_args, args.long)[-3:] == ["--long", "-k", "soak"]
    assert "--long" not in testing.pytest_command(False, [])
    args = parse(["--long", "--quick"])
    with pytest.raises(MeminitError, match="pick one"):
        args.func(args)


def test_linux_names_the_kernel_the_kernel_tests_run_on(monkeypatch):
    """--linux reaches the pytest run as $MEMINIT_LINUX, which picks the kernel tree."""
    from meminit.core import kernels

    seen = {}
    monkeypatch.setattr(testing.proc, "interactive", lambda cmd, cwd, env: seen.update(env) or 0)
    args = parse(["--linux", "7.3", "--quick"])
    assert args.func(args) == 0
    assert seen[kernels.ENV] == "7.3"
    monkeypatch.setenv(kernels.ENV, "7.3")
    assert kernels.from_env() == kernels.MAINLINE and kernels.from_env().rfcs == ()
    monkeypatch.setenv(kernels.RFC_ENV, "threads,auto")
    assert kernels.from_env().rfcs == ("threads", "auto")
    monkeypatch.delenv(kernels.ENV)
    monkeypatch.delenv(kernels.RFC_ENV)
    assert kernels.from_env() == kernels.LTS
