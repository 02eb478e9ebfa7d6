"""Injected bugs you can rerun (issue 66, `meminit check-injections`): tests/injections/VERSION/
NAME.diff breaks one thing the series' KUnit suites guard. Each is applied alone to a scratch
worktree of the kernel's default stack (work/linux-VERSION-inject), the debug kernel built from
it (its own build directory, so the test command's build stays as it is; ccache makes the
first build cheap after the test command's) and booted with only the KUnit cases it names
(kunit.filter_glob); it is caught when every case it names fails, or when the kernel it broke crashes or
warns (DEBUG_VM, lockdep) on the way. A diff's first lines say what it breaks and what must
fail, and an RFC's the stack it is made for (`check-injections --rfc NAMES` runs those whose
stack is NAMES; without it, the default stack's, which have no such line):

    Injected bug: <what it breaks>
    Expect: <suite>.<case>[,<suite>.<case> ...]   (one suite)
    Stack: <rfc>[,<rfc> ...]                      (RFC parts applied besides the default stack)
"""

from __future__ import annotations

import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from meminit.core import kernels, paths, proc, results
from meminit.core.errors import MeminitError
from meminit.core.kernels import Linux
from meminit.guest import ktap, vm
from meminit.kernel import build, source

INJECTIONS_DIR = paths.REPO / "tests" / "injections"


@dataclass(frozen=True)
class Injection:
    name: str
    path: Path
    what: str
    expect: tuple[str, ...]  # suite.case
    stack: tuple[str, ...] = ()  # the RFC parts of the stack it is made for

    @property
    def suite(self) -> str:
        return self.expect[0].split(".", 1)[0]

    @property
    def filter_glob(self) -> str:
        """kunit.filter_glob for its boot: the one case it names, else its suite."""
        return self.expect[0] if len(self.expect) == 1 else self.suite


def read(path: Path) -> Injection:
    """An injection file: its `Injected bug:`, `Expect:` and `Stack:` lines, then a diff; one suite."""
    text = path.read_text()
    what = re.search(r"^Injected bug: (.+)$", text, re.M)
    expect = re.search(r"^Expect: (.+)$", text, re.M)
    if not what or not expect or "diff --git " not in text:
        raise MeminitError(f"{path}: wants an 'Injected bug:' line, an 'Expect: suite.case,...' line and a diff")
    cases = tuple(c.strip() for c in expect[1].split(",") if c.strip())
    if not cases or any("." not in c for c in cases) or len({c.split(".", 1)[0] for c in cases}) != 1:
        raise MeminitError(f"{path}: 'Expect:' names suite.case items of one suite, not {expect[1]!r}")
    stack = re.search(r"^Stack: (.+)$", text, re.M)
    return Injection(path.stem, path, what[1].strip(), cases,
                     tuple(n.strip() for n in stack[1].split(",") if n.strip()) if stack else ())


def _stack_text(rfcs: tuple[str, ...]) -> str:
    return f"--rfc {','.join(rfcs)}" if rfcs else "the default stack"


def of(linux: Linux = kernels.DEFAULT, names: tuple[str, ...] = ()) -> list[Injection]:
    """The kernel's injections made for the stack it carries (linux.rfcs), all or those named."""
    every = {p.stem: read(p) for p in sorted((INJECTIONS_DIR / linux.version).glob("*.diff"))}
    found = {n: i for n, i in every.items() if i.stack == linux.rfcs}
    unknown = [n for n in names if n not in every]
    if unknown:
        raise MeminitError(f"no injection {', '.join(unknown)} for {linux.version}: it has "
                           f"{', '.join(every) or 'none'} (tests/injections/{linux.version}/)")
    elsewhere = [f"{n} ({_stack_text(every[n].stack)})" for n in names if n not in found]
    if elsewhere:
        raise MeminitError(f"{', '.join(elsewhere)} made for another stack than {_stack_text(linux.rfcs)}: "
                           "run it with that")
    if not found:
        raise MeminitError(f"no injection of {linux.version} is made for {_stack_text(linux.rfcs)}: "
                           f"tests/injections/{linux.version}/ has {', '.join(every) or 'none'}")
    return [found[n] for n in names] if names else list(found.values())


@dataclass(frozen=True)
class Outcome:
    injection: Injection
    caught: bool
    how: str  # the expected cases' statuses, or the crash that stopped the boot


def verdict(injection: Injection, report: ktap.KunitReport | None, failures: list[str]) -> Outcome:
    """Caught when every expected case failed, or the boot crashed or warned."""
    if failures:
        return Outcome(injection, True, f"the boot failed: {failures[0]}")
    statuses = {f"{c.suite}.{c.name}": c.status for c in (report.cases if report else [])}
    got = [f"{case} {statuses.get(case, 'not run')}" for case in injection.expect]
    return Outcome(injection, all(statuses.get(case) in ("FAIL", "ERROR") for case in injection.expect),
                   ", ".join(got))


def _scratch(tree: Path) -> Path:
    """A worktree of the tree's HEAD for the injections, made afresh."""
    scratch = tree.with_name(tree.name + "-inject")
    if scratch.exists():
        source.git(tree, "worktree", "remove", "--force", str(scratch), check=False)
        shutil.rmtree(scratch, ignore_errors=True)
    source.git(tree, "worktree", "prune")
    source.git(tree, "worktree", "add", "-q", "--detach", str(scratch), "HEAD")
    return scratch


def check(linux: Linux, injections: list[Injection], guest: vm.GuestRequest, jobs: int | None = None) -> list[Outcome]:
    """Each injection applied alone, built and booted; its outcome."""
    trees = source.prepare_trees(linux)
    scratch = _scratch(trees.series)
    kernel = build.Kernel(variant="debug", src=scratch, out=linux.build_root / "inject", linux=linux)
    run_dir = results.new_run_dir("injections")
    accel: str | None = None
    out = []
    for index, injection in enumerate(injections, 1):
        print(f"meminit: injection [{index}/{len(injections)}] {injection.name}: {injection.what}",
              file=sys.stderr, flush=True)
        source.git(scratch, "checkout", "-q", "--", ".")
        applied = proc.run(["git", "-C", str(scratch), "apply", str(injection.path)], check=False)
        if applied.returncode != 0:
            raise MeminitError(f"{injection.path} does not apply to the {linux.version} series:\n"
                               f"{applied.stderr.strip()}")
        build.build(kernel, jobs)
        accel = accel or vm.resolve_accel(guest.accel, kernel.image, run_dir, kernel.variant)
        spec = vm.BootSpec(image=kernel.image, kernel=kernel.variant, name=injection.name,
                           script=ktap.LOAD_KUNIT_MODULES,
                           memory_bytes=guest.memory or vm.DEFAULT_MEMORY, cpus=guest.cpus,
                           append=[f"kunit.filter_glob={injection.filter_glob}", *guest.append],
                           timeout_s=guest.timeout or vm.DEFAULT_TIMEOUT_S)
        console = run_dir / f"{injection.name}.console.log"
        try:
            result = vm.boot(spec, run_dir, accel)
            console = result.console
            failures: list[str] = []
        except MeminitError as error:
            # the broken kernel crashed or warned: caught, if its log says so; anything else
            # (no guest, a timeout of QEMU itself) is the harness's failure
            log = console.read_text(errors="replace") if console.exists() else ""
            failures = vm.kernel_failures(log)
            if not failures:
                raise
            print(f"meminit: {injection.name}: {error}", file=sys.stderr)
        report = None if failures else ktap.parse(console.read_text(errors="replace"), scratch)
        out.append(verdict(injection, report, failures))
    source.git(scratch, "checkout", "-q", "--", ".")
    return out
