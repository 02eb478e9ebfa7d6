"""`meminit check-configs`: the series' KUnit suites built and run on other architectures.

Each target is a `tools/testing/kunit/kunit.py run` of the series tree (work/linux) with a
kunitconfig from config/kunit/: ARCH=um, which shares x86's headers but not its lib and so
must link with the generic memcpy_nontemporal(); arm64 under qemu-system-aarch64, where
the generic memcpy_nontemporal() and clear_pages() run and where compound pages write all
their tails (no DAX vmemmap deduplication); and x86-32 with PAE and HIGHMEM, where
folio_zero_user() clears highmem folios page by page through kmap; and x86-64 with SPARSEMEM
but no virtual memmap, where the 1 GiB folio's struct pages are reached section by section
through nth_page(). The console is parsed with the
kernel's own `kunit.py parse`, like the test command's boot.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from meminit import deps, ktap, paths, source
from meminit.errors import MeminitError

PROGRESS_EVERY_S = 30.0
KUNIT_CONFIG_DIR = paths.CONFIG_DIR / "kunit"


@dataclass(frozen=True)
class KunitTarget:
    name: str
    arch: str
    # suites that must run and pass (every case passed or skipped with a reason)
    suites: tuple[str, ...]
    cross_compile: str = ""
    packages: dict[str, str] = field(default_factory=dict)
    qemu_args: tuple[str, ...] = ()
    kernel_args: tuple[str, ...] = ()

    @property
    def kunitconfig(self) -> Path:
        return KUNIT_CONFIG_DIR / f"{self.name}.kunitconfig"

    @property
    def build_dir(self) -> Path:
        return paths.BUILD_ROOT / f"kunit-{self.name}"


TARGETS = {
    "um": KunitTarget(name="um", arch="um", suites=("memcpy_nontemporal",)),
    "arm64": KunitTarget(
        name="arm64", arch="arm64",
        suites=("memcpy_nontemporal", "zone_device_memmap", "clear_pages", "folio_zero_user"),
        cross_compile="aarch64-linux-gnu-",
        packages={"gcc-aarch64-linux-gnu": "/usr/bin/aarch64-linux-gnu-gcc",
                  "qemu-system-arm": "/usr/bin/qemu-system-aarch64"},
        # room for the 1 GiB folio the folio_zero_user suite clears, and two CPUs
        qemu_args=("-m 3072", "-smp 2"),
        # as the test command boots it: one 1 GiB page for the gigantic folio case
        kernel_args=("hugepagesz=1G", "hugepages=1")),
    "i386": KunitTarget(
        name="i386", arch="i386",
        suites=("memcpy_nontemporal", "clear_pages", "folio_zero_user"),
        packages={"qemu-system-x86": "/usr/bin/qemu-system-i386"},
        # more than the 896 MiB of lowmem, so GFP_HIGHUSER folios come from highmem
        qemu_args=("-m 2048", "-smp 2")),
    "x86_64-sparsemem": KunitTarget(
        name="x86_64-sparsemem", arch="x86_64",
        suites=("memcpy_nontemporal", "clear_pages", "folio_zero_user"),
        packages={"qemu-system-x86": "/usr/bin/qemu-system-x86_64"},
        qemu_args=("-m 3072", "-smp 2"),
        # one 1 GiB page for the gigantic folio case: eight sections of struct pages
        kernel_args=("hugepagesz=1G", "hugepages=1")),
}


def kunit_command(target: KunitTarget, tree: Path, jobs: int) -> list[str]:
    cmd = [sys.executable, str(tree / "tools/testing/kunit/kunit.py"), "run",
           f"--arch={target.arch}", f"--kunitconfig={target.kunitconfig}",
           f"--build_dir={target.build_dir}", f"--jobs={jobs}", "--timeout=3600",
           f"--make_options=CC=ccache {target.cross_compile}gcc", "--raw_output=all"]
    if target.cross_compile:
        cmd.append(f"--cross_compile={target.cross_compile}")
    cmd += [f"--qemu_args={arg}" for arg in target.qemu_args]
    cmd += [f"--kernel_args={arg}" for arg in target.kernel_args]
    return cmd


def missing_suites(report: ktap.KunitReport, wanted: tuple[str, ...]) -> list[str]:
    return [s for s in wanted if s not in report.suites()]


def run_target(target: KunitTarget, tree: Path, jobs: int) -> ktap.KunitReport:
    deps.ensure({**deps.KERNEL_BUILD, **target.packages})
    target.build_dir.mkdir(parents=True, exist_ok=True)
    log = target.build_dir.parent / f"kunit-{target.name}.log"
    env = dict(os.environ, CCACHE_DIR=str(paths.CCACHE_DIR), CCACHE_BASEDIR=str(paths.REPO))
    cmd = kunit_command(target, tree, jobs)
    print(f"meminit: kunit.py run --arch={target.arch} ({target.kunitconfig.name}); log: {log}",
          file=sys.stderr, flush=True)
    start = time.monotonic()
    done = threading.Event()

    def progress() -> None:
        # kunit.py says nothing while it builds: say how long it has been running
        while not done.wait(PROGRESS_EVERY_S):
            print(f"meminit: {target.name}: building or running, {time.monotonic() - start:.0f}s",
                  file=sys.stderr, flush=True)

    ticker = threading.Thread(target=progress, daemon=True)
    ticker.start()
    try:
        with log.open("w") as out, subprocess.Popen(cmd, cwd=tree, env=env, text=True,
                                                    stdout=subprocess.PIPE,
                                                    stderr=subprocess.STDOUT) as proc:
            assert proc.stdout is not None
            for line in proc.stdout:
                out.write(line)
            rc = proc.wait()
    finally:
        done.set()
    text = log.read_text(errors="replace")
    if "Linux version" not in text:
        tail = "".join(text.splitlines(keepends=True)[-25:])
        raise MeminitError(f"{target.name}: kunit.py built or booted no kernel (exit {rc}); "
                           f"last lines:\n{tail}full log: {log}")
    report = ktap.parse(text, tree)
    (target.build_dir.parent / f"kunit-{target.name}.txt").write_text(report.summary + "\n")
    print(f"meminit: {target.name}: {len(report.cases)} cases in {time.monotonic() - start:.0f}s, "
          f"exit {rc}", file=sys.stderr, flush=True)
    return report


def check(target: KunitTarget, report: ktap.KunitReport) -> list[str]:
    problems = [f"{target.name}: suite {s} did not run" for s in missing_suites(report, target.suites)]
    problems += [f"{target.name}: {c.suite}.{c.name} {c.status}" for c in report.failed()]
    return problems


def check_configs(names: list[str], jobs: int | None = None) -> None:
    unknown = [n for n in names if n not in TARGETS]
    if unknown:
        raise MeminitError(f"unknown target {', '.join(unknown)}: choose from {', '.join(TARGETS)}")
    tree = source.prepare_trees().series
    problems: list[str] = []
    for name in names:
        target = TARGETS[name]
        report = run_target(target, tree, jobs or os.cpu_count() or 1)
        skipped = [f"{c.suite}.{c.name}" for c in report.cases if c.status == "SKIP"]
        print(f"{name}: {sum(c.status == 'PASS' for c in report.cases)} passed, "
              f"{len(report.failed())} failed, {len(skipped)} skipped"
              + (f" ({', '.join(skipped)})" if skipped else ""))
        problems += check(target, report)
    if problems:
        raise MeminitError("check-configs failed:\n  " + "\n  ".join(problems))


def _cmd_check_configs(args: argparse.Namespace) -> int:
    check_configs(args.targets or list(TARGETS), args.jobs)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check-configs",
                       help="build and run the series' KUnit suites on ARCH=um, arm64, i386 and "
                            "x86-64 without a virtual memmap (kunit.py)")
    p.add_argument("targets", nargs="*", metavar="TARGET",
                   help=f"{', '.join(TARGETS)} (default: all)")
    p.add_argument("-j", "--jobs", type=int, help="parallel jobs (default: number of CPUs)")
    p.set_defaults(func=_cmd_check_configs)
