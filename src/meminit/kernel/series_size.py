"""How much kernel code a part of the series adds: the lines a reviewer reads as code.

Counted per patch from its diff (issue 66 bounds the 7.3 core at CORE_LIMIT): the `+` lines
of C, header, assembly, Kconfig and Makefile files, without blank lines, comments (C block
and line comments, `#` lines of Kconfig and Makefiles) and Kconfig help text; tests (a
KUnit file, anything under a tests/ directory, a Kconfig entry whose symbol ends in
_TEST) and MAINTAINERS are not code. Removed lines are counted apart.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

CORE_LIMIT = 400
CODE_SUFFIXES = (".c", ".h", ".S")
BUILD_FILES = ("Kconfig", "Makefile", "Kbuild")
DIFF_FILE = re.compile(r"^diff --git a/(\S+) b/(\S+)$")
CONFIG_ENTRY = re.compile(r"^\s*(?:menu)?config\s+(\w+)")
HELP = re.compile(r"^\s*(?:---)?help(?:---)?\s*$")


@dataclass(frozen=True)
class PatchSize:
    name: str
    added: int  # lines of code added
    removed: int  # lines of code removed


def is_test_file(path: str) -> bool:
    return "/tests/" in f"/{path}" or "kunit" in Path(path).name


def _kind(path: str) -> str | None:
    """"c" or "build" for a file whose lines can be code, None for the rest."""
    name = Path(path).name
    if is_test_file(path) or name == "MAINTAINERS":
        return None
    if name.endswith(CODE_SUFFIXES):
        return "c"
    if name.startswith(BUILD_FILES):
        return "build"
    return None


class _CState:
    """Comment state of one file's added (or removed) lines, read in order."""

    def __init__(self) -> None:
        self.in_block = False

    def is_code(self, line: str) -> bool:
        code: list[str] = []
        i = 0
        while i < len(line):
            if self.in_block:
                end = line.find("*/", i)
                if end < 0:
                    return bool("".join(code).strip())
                self.in_block, i = False, end + 2
            elif line.startswith("/*", i):
                self.in_block, i = True, i + 2
            elif line.startswith("//", i):
                break
            else:
                code.append(line[i])
                i += 1
        return bool("".join(code).strip())


class _BuildState:
    """Kconfig/Makefile lines: a test entry's lines and help text are not code."""

    def __init__(self) -> None:
        self.in_help = False
        self.help_indent = 0
        self.test_entry = False

    def is_code(self, line: str) -> bool:
        stripped = line.strip()
        entry = CONFIG_ENTRY.match(line)
        if entry:
            self.in_help, self.test_entry = False, entry.group(1).endswith("_TEST")
        elif self.in_help:
            indent = len(line) - len(line.lstrip())
            if not stripped or indent >= self.help_indent:
                return False
            self.in_help = False
        if HELP.match(line):
            self.in_help, self.help_indent = True, len(line) - len(line.lstrip()) + 1
            return False
        if self.test_entry or not stripped or stripped.startswith("#"):
            return False
        return not re.search(r"_TEST\)?\s*[+:]?=", line)


def changed_lines(text: str) -> Iterator[tuple[str, str, str]]:
    """Each line a patch adds or removes: (the file's path after the patch, "+" or "-", the
    line without its sign); the diff's own headers left out."""
    path: str | None = None
    for line in text.splitlines():
        m = DIFF_FILE.match(line)
        if m:
            path = m.group(2)
        elif path is not None and line[:1] in ("+", "-") and not line.startswith(("+++", "---")):
            yield path, line[0], line[1:]


def patch_size(name: str, text: str) -> PatchSize:
    """The code lines one patch adds and removes."""
    counts = {"+": 0, "-": 0}
    current: str | None = None
    states: dict[str, _CState | _BuildState] = {}
    for path, sign, line in changed_lines(text):
        if path != current:
            current, kind = path, _kind(path)
            states = {s: _CState() if kind == "c" else _BuildState() for s in "+-"} if kind else {}
        if states and states[sign].is_code(line):
            counts[sign] += 1
    return PatchSize(name, counts["+"], counts["-"])


def part_size(patches: list[Path]) -> list[PatchSize]:
    return [patch_size(p.name, p.read_text()) for p in patches]


def report(part: str, sizes: list[PatchSize], limit: int | None = None) -> str:
    lines = [f"{s.added:5d} +, {s.removed:4d} -  {s.name}" for s in sizes]
    total = sum(s.added for s in sizes)
    lines.append(f"{total:5d} +, {sum(s.removed for s in sizes):4d} -  {part}: lines of kernel code "
                 "(no blank lines, comments, help text, tests, MAINTAINERS)"
                 + (f"; at most {limit}" if limit is not None else ""))
    return "\n".join(lines) + "\n"
