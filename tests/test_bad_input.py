"""Issue 35, item 6: bad input is refused before any work.

Every option of every subcommand, found by walking the real parser (so a new one cannot slip
by), is either a number or size checked by one of commands.options' types, or listed below as
text. Each number and size option refuses 0 (unless MAY_BE_ZERO says what 0 means), a
negative number, not-a-number and, for sizes, a bad size, with argparse's own error: exit
status 2, one error line naming the option, no traceback, and nothing built, booted or run."""

from __future__ import annotations

import argparse
import subprocess

import pytest

from meminit import cli
from meminit.bench import bench_results
from meminit.core import hostinfo, proc
from meminit.guest import vm
from meminit.kernel import build, package

NUMERIC = {"integer", "number", "size", "integer list", "size list"}

# The classification to review: the options that take 0, and what 0 means to each.
MAY_BE_ZERO = {
    ("microbench", "--auto-span"): "0 = no spans, as patch 11 before 2026-11-29, as the bench's "
                                   "--auto-span 0",
    ("bench-results", "--span"): "0 = no spans, as patch 11 before 2026-11-29",
    ("run", "--init-threads"): "0 = the kernel's automatic choice (its default; README, --help)",
    ("measure", "--init-threads"): "0 = the kernel's automatic choice, as for run",
    ("run", "--latency-trace"): "0 = no trace, the default (--help)",
    ("selftests", "--hugetlb-pages"): "0 = no huge pages reserved before the programs",
    ("bench-results", "--lead"): "0 = no untimed template lead-in before a round's pieces (the "
                                 "replay's schedule and bench/'s --auto-lead take it)",
    ("bench-results", "--late-llcs"): "0 = no late rounds: the 1/32 margin everywhere (before "
                                      "2026-11-27), as bench/'s --auto-late-llcs 0",
    ("microbench", "--auto-late-llcs"): "0 = no late rounds, as the bench's --auto-late-llcs 0",
    ("microbench", "--auto-memo"): "0 = every range learns, no remembered verdicts (before "
                                   "2026-11-27 evening), as the bench's --auto-memo 0",
    ("bench-results", "--memo"): "0 = the replay charges every range its rounds, as --auto-memo 0",
    ("bench-results", "--walk-max"): "0 = no 4 MiB cap on the walk hint's read-back: half the LLC "
                                     "only (before 2026-11-28), as the bench's --auto-walk-share llc",
    ("bench-results", "--family"): "a CPU family number as /proc/cpuinfo gives it",
    ("bench-results", "--model"): "a CPU model number as /proc/cpuinfo gives it: model 0 exists",
    ("maple-bench", "--gap-pages"): "0 = contiguous ranges, the default (--help)",
    ("maple-bench", "--min-seconds"): "0 = each sample its three copies, the harness's floor",
    ("maple-bench", "--fork-seconds"): "0 skips forkbench (--help)",
    ("microbench", "--nice"): "0 = niceness unchanged, the default",
    ("microbench", "--auto-switch-margin"): "0 = no switch margin: the 1/32 margin (before "
                                            "2026-11-28), as the bench's --auto-switch-margin 0",
    ("bench-results", "--switch-margin"): "0 = the replay without the switch margin, as "
                                          "--auto-switch-margin 0",
}
# ... and the one that takes negative numbers.
MAY_BE_NEGATIVE = {("microbench", "--nice"): "a niceness, -20 to 19 (below 0 needs root)"}

# What every option of a kind refuses; then what some refuse besides: the other end of their
# range, the multiple they document or that the tool behind them checks later.
BAD = {
    "integer": ["0", "-1", "abc", "1.5", ""],
    "number": ["0", "-1", "abc", "nan", "inf", ""],
    "size": ["0", "-1", "abc", "3X", "1.5", ""],
    "integer list": ["0", "-1", "abc", "1,0", "1,-1", "1,x", ","],
    "size list": ["0", "-1", "abc", "3X", "4M,3X", "4M,0", ","],
}
ALSO_BAD = {
    ("run", "--pmem-size"): ["100M"], ("boot", "--pmem-size"): ["100M"], ("soak", "--pmem-size"): ["100M"],
    ("run", "--fault-size"): ["512M"], ("run", "--memory"): ["1000K"], ("boot", "--memory"): ["1000K"],
    ("run", "--latency-units"): ["6K"],
    ("microbench", "--sizes"): ["40K"], ("microbench", "--scale-sizes"): ["4M,40K"],
    ("microbench", "--verify-size"): ["40K", "4M,8M"], ("microbench", "--movsb-block"): ["32"],
    ("microbench", "--threads"): ["65"], ("microbench", "--scale-threads"): ["1,65"],
    ("microbench", "--nice"): ["20", "-21"],
    ("microbench", "--auto-switch-margin"): ["1", "65"], ("bench-results", "--switch-margin"): ["1", "65"],
}
GOOD = {"integer": "2", "number": "1.5", "size": "1G", "integer list": "1,2", "size list": "4M,1G"}

# The options that are not numbers: names, paths, strategy and kernel lists, shell words.
TEXT = {
    "export": {"--mbox", "--from", "--subject-prefix", "--topic"},
    "build": {"variants"},
    "check-configs": {"targets"},
    "check-injections": {"names"},
    "boot": {"--deb", "--command", "--append", "--tree", "--base", "--series"},
    "run": {"--kernels", "--variants", "--preempt", "--latency-hog", "--append", "--tree", "--base",
            "--series"},
    "measure": {"--namespace", "--dax", "--variants", "--results"},
    "package": {"--config"},
    "report": {"run"},
    "test": {"pytest_args"},
    "microbench": {"--split", "--scale-layouts", "--scale-fill", "--layouts", "--dests", "--fill",
                  "--clear", "--fault", "--out"},
    "bench-results": {"run", "--source", "--cpu-model", "--date", "--note"},
    "maple-bench": {"--out"},
    "soak": {"--append"},
    "selftests": {"test"},
}
# --rfc, the RFC parts of the series to apply, on every command that takes a kernel
for _command in ("tree", "export", "build", "check-series", "check-configs", "check-injections", "boot", "run",
                 "test", "soak", "selftests"):
    TEXT.setdefault(_command, set()).add("--rfc")
# Text options whose type reads them, and a value each must refuse likewise.
BAD_TEXT = {("run", "--preempt"): ["lazy", ","], ("run", "--rfc"): [",", "a b", "../x"],
            ("test", "--rfc"): [""]}


def name_of(action: argparse.Action) -> str:
    longs = [o for o in action.option_strings if o.startswith("--")]
    return longs[0] if longs else action.dest


def options() -> dict[tuple[str, str], argparse.Action]:
    """(subcommand, option) -> action, for every action that takes a value argparse does
    not check itself (no choices)."""
    found = {}
    for group in cli.make_parser()._subparsers._group_actions:
        for command, sub in group.choices.items():
            for action in sub._actions:
                if action.nargs != 0 and not action.choices:
                    found[(command, name_of(action))] = action
    return found


OPTIONS = options()
NUMBERS = {key: a.type.kind for key, a in OPTIONS.items() if getattr(a.type, "kind", None) in NUMERIC}


def cases() -> list[tuple[str, str, str]]:
    out = []
    for (command, option), kind in NUMBERS.items():
        values = list(BAD[kind]) + ALSO_BAD.get((command, option), [])
        if (command, option) in MAY_BE_ZERO:
            values.remove("0")
        if (command, option) in MAY_BE_NEGATIVE:
            values.remove("-1")
        out += [(command, option, v) for v in values]
    return out + [(c, o, v) for (c, o), vs in BAD_TEXT.items() for v in vs]


def fail(*_args, **_kwargs):
    pytest.fail("parsing bad input went on to do work")


@pytest.fixture
def no_work(monkeypatch):
    """The real parser with every command's function failing the test, and the heavy
    things (builds, guests, any child process) failing it too."""
    parser = cli.make_parser()
    for group in parser._subparsers._group_actions:
        for sub in group.choices.values():
            sub.set_defaults(func=fail)
    monkeypatch.setattr(cli, "make_parser", lambda: parser)
    for module, name in ((build, "build_variants"), (build, "build"), (vm, "boot"), (vm, "resolve_accel"),
                         (proc, "run"), (proc, "stream"), (proc, "interactive"), (subprocess, "Popen")):
        monkeypatch.setattr(module, name, fail)
    return parser


def test_every_option_is_a_checked_number_or_listed_text():
    unclassified = sorted(f"{c} {o} (type {a.type!r})" for (c, o), a in OPTIONS.items()
                          if (c, o) not in NUMBERS and o not in TEXT.get(c, set()))
    assert unclassified == [], "check it with a commands.options type, or list it in TEXT"
    assert sorted(f"{c} {o}" for (c, o) in NUMBERS if o in TEXT.get(c, set())) == []
    listed = {*MAY_BE_ZERO, *MAY_BE_NEGATIVE, *ALSO_BAD}
    assert sorted(set(listed) - set(NUMBERS)) == []  # no stale entry
    assert sorted((c, o) for c, names in TEXT.items() for o in names if (c, o) not in OPTIONS) == []
    assert len(NUMBERS) >= 55 and set(NUMBERS.values()) == NUMERIC  # the walk sees them all


@pytest.mark.parametrize("command,option,value", cases(), ids=lambda v: v if v else "''")
def test_bad_values_stop_at_parsing(no_work, capsys, command, option, value):
    with pytest.raises(SystemExit) as stop:
        cli.main([command, f"{option}={value}"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1 and errors[0] == err.rstrip("\n").splitlines()[-1]
    prefix = f"meminit {command}: error: argument "
    assert errors[0].startswith(prefix)
    assert option in errors[0][len(prefix):].split(":")[0].split("/")  # e.g. -j/--jobs
    assert "wants" in errors[0], "the error says what the option accepts"


@pytest.mark.parametrize("command,option", sorted(NUMBERS))
def test_good_values_and_the_listed_zeros_parse(no_work, command, option):
    kind = NUMBERS[(command, option)]
    values = [GOOD[kind]] + (["0"] if (command, option) in MAY_BE_ZERO else []) \
        + (["-1"] if (command, option) in MAY_BE_NEGATIVE else [])
    extra = ["--hmm"] if command == "measure" else ["table"] if command == "bench-results" else []
    for value in values:
        args = cli.parse(no_work, [command, *extra, f"{option}={value}"])
        assert getattr(args, OPTIONS[(command, option)].dest) is not None


@pytest.mark.parametrize("value", ["", "abc", "-1", "0", "3X", "nan", ",", "1e999", "9" * 5000],
                         ids=lambda v: repr(v)[:12])
def test_no_value_of_any_option_escapes_argparse(no_work, capsys, value):
    """Any text, for any option: parsed, or argparse's exit 2; never another exception."""
    for (command, option), action in OPTIONS.items():
        if not action.option_strings:
            continue
        try:
            cli.parse(no_work, [command, f"{option}={value}"])
        except SystemExit as stop:
            assert stop.code == 2, (command, option, value)
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize("argv", ["run --memory abc", "boot --memory abc", "run --rebinds -1", "run --cpus 0",
                                  "soak --cycles -3", "microbench --reps 0", "microbench --sizes 3X",
                                  "run --preempt lazy"])
def test_the_issue_s_examples_as_typed(no_work, capsys, argv):
    """Issue 35's cases, the value a separate word: a traceback or a late failure before."""
    with pytest.raises(SystemExit) as stop:
        cli.main(argv.split())
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "Traceback" not in err
    assert f"error: argument {argv.split()[1]}: wants " in err


def test_an_action_without_the_argument_it_needs_is_a_usage_error(monkeypatch, capsys):
    """`bench-results add` without RUN ended in a TypeError traceback (Path(None))."""
    monkeypatch.setattr(bench_results, "add_run", fail)
    with pytest.raises(SystemExit) as stop:
        cli.main(["bench-results", "add"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "Traceback" not in err and "add needs RUN" in err


@pytest.mark.parametrize("command", ["run", "boot"])
def test_guest_memory_beyond_this_machine_is_refused_before_any_work(monkeypatch, capsys, command):
    """Issue 66: `run --memory 1T` on a 24 GiB machine installed packages and unpacked the
    source before QEMU refused it."""
    monkeypatch.setattr(hostinfo, "memory_bytes", lambda meminfo=None: 24 << 30)
    parser = cli.make_parser()
    for group in parser._subparsers._group_actions:
        for sub in group.choices.values():
            sub.set_defaults(func=fail)
    monkeypatch.setattr(cli, "make_parser", lambda: parser)
    with pytest.raises(SystemExit) as stop:
        cli.main([command, "--memory", "1T"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "at most 24G (this machine's memory), got '1T'" in err
    # the machine's own size still fits
    args = parser.parse_args([command, "--memory", "24G"])
    assert args.memory == 24 << 30


def test_memory_bytes_reads_memtotal():
    assert hostinfo.memory_bytes("MemFree: 5 kB\nMemTotal:       24683652 kB\n") == 24683652 * 1024
    assert hostinfo.memory_bytes("") is None


def test_package_says_it_serves_the_lts_only(monkeypatch, capsys):
    monkeypatch.setattr(package, "package", fail)
    with pytest.raises(SystemExit) as stop:
        cli.main(["package", "--linux", "7.3"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "package serves Linux 6.12 only" in err and "Traceback" not in err
