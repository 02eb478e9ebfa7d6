"""The documentation names only commands and options that exist (issue 16: README and code
in step): every `./meminit ...` line in the docs parses, every --option in README.md is ours
or one of the named tools'."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from meminit import cli

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", REPO / "bench" / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# options of other tools the README quotes: ndctl's, checkpatch's, git's (commit, send-email)
FOREIGN_OPTIONS = {"--map", "--align", "--strict", "--amend", "--from", "--mode"}
PLACEHOLDERS = {"STAMP": "20261124T000000Z", "RUN_DIR": "results/microbench-x", "<time>": "x",
                "TARGET ...": "um", "PROGRAM ...": "cow", "BASE": "x", "SERIES": "y", "…": "",
                "add|table|replay": "table", "[": "", "]": ""}


def documented_commands() -> list[tuple[str, str]]:
    found = []
    for doc in DOCS:
        for line in re.findall(r"\./meminit [^`#\n]*", doc.read_text()):
            found.append((doc.name, line.strip()))
    return found


def normalised(line: str) -> list[str]:
    for placeholder, value in PLACEHOLDERS.items():
        line = line.replace(placeholder, value)
    return shlex.split(line)[1:]


def parses(argv: list[str]) -> bool:
    try:
        cli.parse(cli.make_parser(), argv)
    except SystemExit:
        return False
    return True


def test_the_docs_quote_commands():
    assert len(documented_commands()) > 20


@pytest.mark.parametrize("doc,line", [c for c in documented_commands() if "COMMAND" not in c[1]])
def test_every_documented_command_parses(doc, line):
    assert parses(normalised(line)), f"{doc}: `{line}` is not a meminit command line"


def parser_options() -> set[str]:
    """Every --option of every subcommand, and the prefixes of those a command takes by prefix."""
    options = set()
    for action in cli.make_parser()._subparsers._group_actions:   # the subcommands
        for sub in action.choices.values():
            options |= {o for a in sub._actions for o in a.option_strings if o.startswith("--")}
            prefix = sub.get_default("dynamic_option_prefix")
            options |= {prefix} if prefix else set()
    return options


def test_every_option_the_readme_names_exists():
    named = set(re.findall(r"(?:^|[\s`(])(--[a-z][a-z0-9-]*)", (REPO / "README.md").read_text()))
    assert sorted(named - parser_options() - FOREIGN_OPTIONS) == []


def test_the_checks_can_fail():
    assert not parses(normalised("./meminit soak --cyles 2"))
    assert not parses(normalised("./meminit nosuchcommand"))
    assert "--cyles" not in parser_options()
