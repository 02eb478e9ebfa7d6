"""The test command's own command line."""

from __future__ import annotations

import argparse

from meminit import testing


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    testing.register(parser.add_subparsers())
    return parser.parse_args(["test", *argv])


def test_arguments_after_the_double_dash_reach_pytest_without_it():
    args = parse(["--quick", "--", "-k", "ktap"])
    cmd = testing.pytest_command(args.quick, args.pytest_args)
    assert cmd[-4:] == ["-m", "not kernel", "-k", "ktap"]
    assert "--" not in cmd


def test_without_extra_arguments_pytest_runs_every_test():
    args = parse([])
    assert testing.pytest_command(args.quick, args.pytest_args)[-1].endswith("tests")
