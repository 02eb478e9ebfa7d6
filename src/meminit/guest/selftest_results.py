"""The mm selftests' outcomes: exit codes, checks (KTAP through the kernel's kunit.py,
or a program's own format), skip reasons, and base against the series."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from meminit.core import tables
from meminit.guest import ktap

KSFT_SKIP = 4
TIMEOUT_EXIT = 124  # timeout(1), and 128 + SIGKILL if the program outlived -k
KILLED_EXIT = 137
# ksft_test_result_skip() prints "ok N # SKIP why", with no name, which kunit.py's result
# line grammar does not take: such lines get a placeholder name before parsing
NAMELESS_RESULT = re.compile(r"^(\s*(?:not )?ok \d+) #", re.MULTILINE)
UNNAMED = "(unnamed)"
# kunit.py reads "ok N # XFAIL why" as a pass; the program says the check is known to
# fail there (cow's hugetlb vmsplice cases), so it is kept apart
XFAIL_LINE = re.compile(r"^ok (?P<number>\d+) .*# XFAIL", re.MULTILINE)
# check statuses that do not fail a program
NOT_FAILED = ("PASS", "SKIP", "XFAIL")


@dataclass(frozen=True)
class OwnFormat:
    """A program's own result lines: `check` matches one with groups check, result (and
    reason); `group` names the checks that follow; `skipped` is how it says it skipped
    as a whole, where its exit code alone does not tell."""

    check: re.Pattern[str]
    statuses: dict[str, str]
    group: re.Pattern[str] | None = None
    skipped: str = ""


OWN_FORMATS = {
    # "Run test: collapse_full (khugepaged:anon)", then "Check... <colour>OK". khugepaged
    # exits with its number of failed checks, so 4 failures would read as KSFT_SKIP.
    "khugepaged": OwnFormat(
        check=re.compile(r"^(?P<check>.*?)\.* \x1b\[3[123]m(?P<result>OK|Fail|Skip)\x1b\[0m$",
                         re.MULTILINE),
        statuses={"OK": "PASS", "Fail": "FAIL", "Skip": "SKIP"},
        group=re.compile(r"^Run test: (?P<group>.+)$", re.MULTILINE),
        skipped="Transparent Hugepages not available"),
    # "Testing wp-fork on anon... done | skipped [reason: ...] | failed [reason: ...]", and
    # "ERROR: ..." when a check aborts the program
    "uffd": OwnFormat(
        check=re.compile(r"^Testing (?P<check>.+?)\.\.\. (?P<result>done|skipped|failed|ERROR)"
                         r"(?: \[reason: |: )?(?P<reason>.*?)\]?$", re.MULTILINE),
        statuses={"done": "PASS", "skipped": "SKIP", "failed": "FAIL", "ERROR": "ERROR"}),
}
RESULT_LINE = re.compile(r"^(?:ok|not ok) \d+ .*?# SKIP\s*(?P<reason>.*)$|^1\.\.0 # SKIP\s*(?P<plan>.*)$",
                         re.MULTILINE)


@dataclass
class Outcome:
    test: str
    status: str  # PASS, FAIL, SKIP, TIMEOUT, NOT RUN
    exit_code: int | None = None
    seconds: float = 0.0
    # "N name" -> PASS/FAIL/SKIP/ERROR: numbered, as programs like cow repeat a name for
    # every page size they test
    cases: dict[str, str] = field(default_factory=dict)
    skip_reasons: Counter[str] = field(default_factory=Counter)

    def count(self, status: str) -> int:
        return sum(1 for s in self.cases.values() if s == status)

    @property
    def cell(self) -> str:
        if not self.cases:
            return f"{self.status} ({self.seconds:.0f}s)" if self.exit_code is not None else self.status
        fails = sum(1 for s in self.cases.values() if s not in NOT_FAILED)
        xfail = f" +{self.count('XFAIL')} xfail" if self.count("XFAIL") else ""
        return (f"{self.status} {self.count('PASS')}/{fails}/{self.count('SKIP')}{xfail} "
                f"({self.seconds:.0f}s)")


def skip_reasons(output: str) -> Counter[str]:
    """The reasons of skipped cases ("ok N name # SKIP why") and of a skipped plan."""
    reasons: Counter[str] = Counter()
    for m in RESULT_LINE.finditer(output):
        reasons[(m.group("reason") or m.group("plan") or "no reason given").strip()] += 1
    return reasons


def own_cases(output: str, fmt: OwnFormat) -> tuple[dict[str, str], Counter[str]]:
    """The checks of a program with its own format, numbered and named after their
    group, and the reasons of the skipped ones."""
    cases: dict[str, str] = {}
    reasons: Counter[str] = Counter()
    group = ""
    for line in output.splitlines():
        if fmt.group and (m := fmt.group.match(line)):
            group = m.group("group") + ": "
        elif m := fmt.check.match(line):
            status = fmt.statuses[m.group("result")]
            cases[f"{len(cases) + 1} {group}{m.group('check')}"] = status
            if status == "SKIP":
                reasons[m.groupdict().get("reason") or "no reason given"] += 1
    return cases, reasons


def status_of(exit_code: int, cases: dict[str, str], skipped: bool = True) -> str:
    if exit_code in (TIMEOUT_EXIT, KILLED_EXIT):
        return "TIMEOUT"
    if exit_code == KSFT_SKIP and skipped:
        return "SKIP"
    if exit_code != 0 or any(s not in NOT_FAILED for s in cases.values()):
        return "FAIL"
    return "PASS"


def parse(name: str, own_format: str, code: int, seconds: float, output: str,
          kernel_src: Path) -> Outcome:
    """A program's outcome from its exit code and output: its KTAP through kunit.py, or
    its own format (OWN_FORMATS) if it has one."""
    cases: dict[str, str] = {}
    skipped = code == KSFT_SKIP
    if own_format:
        fmt = OWN_FORMATS[own_format]
        cases, reasons = own_cases(output, fmt)
        skipped = skipped and (not fmt.skipped or fmt.skipped in output)
    else:
        if re.search(r"^K?TAP version", output, re.MULTILINE):
            parsed = ktap.parse(NAMELESS_RESULT.sub(rf"\1 {UNNAMED} #", output), kernel_src)
            xfail = {int(m.group("number")) for m in XFAIL_LINE.finditer(output)}
            cases = {f"{i} {c.name}": "XFAIL" if i in xfail else c.status
                     for i, c in enumerate(parsed.cases, 1)}
        reasons = skip_reasons(output)
    if skipped and not reasons:  # a program that skips without KTAP says why last
        last = next((line for line in reversed(output.splitlines()) if line.strip()), "no output")
        reasons[last.strip()] += 1
    return Outcome(name, status_of(code, cases, skipped), code, seconds, cases, reasons)


def losses(base: list[Outcome], series: list[Outcome]) -> list[str]:
    """What base passes and the series does not: whole programs, then single checks,
    matched by number (a program may name a check after its outcome). A check the
    series' run marks XFAIL is one the program expects may fail: not a loss."""
    problems = []
    for b, s in zip(base, series):
        if b.status == "PASS" and s.status != "PASS":
            problems.append(f"{s.test}: base PASS, series {s.status}")
        theirs = {case.split(" ", 1)[0]: (case, status) for case, status in s.cases.items()}
        for case, status in b.cases.items():
            _, got = theirs.get(case.split(" ", 1)[0], (case, "missing"))
            if status == "PASS" and got not in ("PASS", "XFAIL"):
                problems.append(f"{s.test}: check '{case}' passes on base, {got} on series")
    return problems


def judge(columns: dict[str, list[Outcome]]) -> list[str]:
    """Base beside the series: what the series loses. Any other set of kernels has
    nothing to be compared with, so every program that did not pass or skip counts."""
    if set(columns) == {"base", "series"}:
        return losses(columns["base"], columns["series"])
    return [f"{o.test}: {o.status} on {kernel}" for kernel, outcomes in columns.items()
            for o in outcomes if o.status not in ("PASS", "SKIP")]


def program_of(problem: str, names: list[str]) -> str:
    return next(n for n in names if problem.startswith(n + ":"))


def recheck_verdict(first: list[str], again: list[str], names: list[str]) -> list[str]:
    """The programs lost in the first run whose recheck lost nothing: flaky, not lost."""
    lost_again = {program_of(p, names) for p in again}
    return list(dict.fromkeys(program_of(p, names) for p in first
                              if program_of(p, names) not in lost_again))


def flaky_line(name: str, first: list[str], names: list[str]) -> str:
    """What a flaky program lost in the first run: its first loss and how many more."""
    lost = [p for p in first if program_of(p, names) == name]
    more = f" and {len(lost) - 1} more" if len(lost) > 1 else ""
    return f"{lost[0]}{more}, in the first run only: the recheck lost nothing"


def render(columns: dict[str, list[Outcome]]) -> str:
    names = list(columns)
    rows = [[outcomes[0].test, *(columns[n][i].cell for n in names)]
            for i, outcomes in enumerate(zip(*columns.values()))]
    lines = [tables.render_table(["selftest", *names], rows),
             "cells: result, then checks passed/failed/skipped where the program reports them"]
    for name in names:
        for outcome in columns[name]:
            for reason, count in outcome.skip_reasons.items():
                lines.append(f"skip on {name}: {outcome.test}: {count} x {reason}")
    return "\n".join(lines)


def as_json(columns: dict[str, list[Outcome]]) -> dict[str, list[dict]]:
    return {v: [{**o.__dict__, "skip_reasons": dict(o.skip_reasons)} for o in outcomes]
            for v, outcomes in columns.items()}
