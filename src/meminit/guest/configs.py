"""`meminit check-configs`: the series' KUnit suites built and run on other architectures.

Each target is a `tools/testing/kunit/kunit.py run` of the series tree (work/linux) with a
kunitconfig from config/kunit/: ARCH=um, which shares x86's headers but not its lib and so
must link with the generic memcpy_nontemporal(); arm64 under qemu-system-aarch64, where
the generic memcpy_nontemporal() and clear_pages() run and where compound pages write all
their tails (no DAX vmemmap deduplication); and x86-32 with PAE and HIGHMEM, where
folio_zero_user() clears highmem folios page by page through kmap; and x86-64 with SPARSEMEM
but no virtual memmap, where the 1 GiB folio's struct pages are reached section by section
through nth_page(). The console is parsed with the
kernel's own `kunit.py parse`, like the test command's boot. The compile targets, which
boot nothing, are compile_checks'.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from meminit.core import deps, kernels, paths, proc
from meminit.guest import kunit_modules, ktap, vm
from meminit.kernel import build, compile_checks, source
from meminit.core.errors import MeminitError
from meminit.core.kernels import Linux

PROGRESS_EVERY_S = 30.0
# the QEMU kunit.py starts per ARCH (um runs none)
QEMU_ARCHES = {"arm64": ["aarch64"], "i386": ["i386"], "x86_64": ["x86_64"]}
KUNIT_CONFIG_DIR = paths.CONFIG_DIR / "kunit"
ARM64_TRIM = "arm64-trim.kunitconfig"


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
    # a skip reason the log must show: the suite reporting that a fast path is off
    fallback_reason: str = ""
    # cases that must pass, not skip: what the target exists to run
    must_pass: tuple[str, ...] = ()
    # a line the suites must print: what the target exists to run, e.g. an encoding
    must_say: str = ""
    # check-configs' default group, which CI runs: per kernel the one target that shows the
    # most the test command's debug kernel cannot; the rest by name or in `all`
    in_kunit_group: bool = False
    linux: Linux = kernels.LTS
    # kunitconfigs of config/kunit/ laid over kunitconfig, shared by the kernels' targets
    extra_kunitconfigs: tuple[str, ...] = ()

    @property
    def kunitconfig(self) -> Path:
        """config/VERSION/kunit/NAME.kunitconfig where the kernel has its own, else
        config/kunit/NAME.kunitconfig (6.12's, and what every kernel shares)."""
        return self.linux.config("kunit", f"{self.name}.kunitconfig")

    @property
    def build_dir(self) -> Path:
        return self.linux.build_root / f"kunit-{self.name}"

    @property
    def log(self) -> Path:
        return self.linux.build_root / f"kunit-{self.name}.log"


TARGETS = {
    "um": KunitTarget(name="um", arch="um", suites=("memcpy_nontemporal",)),
    # every suite, on the generic memcpy_nontemporal() and clear_pages(), with all tails of
    # a compound page written, and under PREEMPT_NONE (arm64's default), where 6.12's
    # folio_zero_user() clears in bounded units: the group
    "arm64": KunitTarget(
        name="arm64", arch="arm64",
        suites=("memcpy_nontemporal", "zone_device_memmap", "clear_pages", "folio_zero_user"),
        cross_compile="aarch64-linux-gnu-",
        packages={"gcc-aarch64-linux-gnu": "/usr/bin/aarch64-linux-gnu-gcc",
                  "qemu-system-arm": "/usr/bin/qemu-system-aarch64"},
        # room for the 1 GiB folio the folio_zero_user suite clears, and two CPUs
        qemu_args=("-m 3072", "-smp 2"),
        # as the test command boots it: one 1 GiB page for the gigantic folio case
        kernel_args=("hugepagesz=1G", "hugepages=1"), in_kunit_group=True,
        extra_kunitconfigs=(ARM64_TRIM,)),
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
        # kunit.py's default CPU model (qemu64) has no 1 GiB pages (pdpe1gb): the kernel
        # refuses hugepagesz=1G and the gigantic case would skip
        qemu_args=("-m 3072", "-smp 2", "-cpu max"),
        # one 1 GiB page for the gigantic folio case: eight sections of struct pages
        kernel_args=("hugepagesz=1G", "hugepages=1"),
        must_pass=("folio_zero_user_gigantic",)),
    # The fast memmap init steps aside under KASAN: the suite must say so by skipping the
    # fast cases, and the slow path and the clearing code must run KASAN-clean.
    "x86_64-kasan": KunitTarget(
        name="x86_64-kasan", arch="x86_64",
        suites=("memcpy_nontemporal", "zone_device_memmap", "clear_pages", "folio_zero_user"),
        packages={"qemu-system-x86": "/usr/bin/qemu-system-x86_64"},
        qemu_args=("-m 3072", "-smp 2"),
        fallback_reason="the fast memmap init is off under KASAN/KMSAN"),
}

# On 7.3 the clearing suites are upstream's; what runs is ours: the generic and the x86
# memcpy_nontemporal(), and the memmap suite with the head-pointer encoding of compound
# tails (arm64 has no HVO; the x86-64 target leaves HUGETLBFS out, so it has none either),
# where the debug kernel of the test command has the mask. arm64 is the group: x86_64 adds
# the x86 backend with that encoding, by name or in `all`.
POINTER_ENCODING = "compound tails hold a head pointer"
MAINLINE_TARGETS = {
    "um": KunitTarget(name="um", arch="um", suites=("memcpy_nontemporal",), linux=kernels.MAINLINE),
    "arm64": KunitTarget(
        name="arm64", arch="arm64", suites=("memcpy_nontemporal", "zone_device_memmap"),
        cross_compile="aarch64-linux-gnu-",
        packages={"gcc-aarch64-linux-gnu": "/usr/bin/aarch64-linux-gnu-gcc",
                  "qemu-system-arm": "/usr/bin/qemu-system-aarch64"},
        qemu_args=("-m 3072", "-smp 2"), must_say=POINTER_ENCODING, linux=kernels.MAINLINE,
        in_kunit_group=True, extra_kunitconfigs=(ARM64_TRIM,)),
    "i386": KunitTarget(
        name="i386", arch="i386", suites=("memcpy_nontemporal",),
        packages={"qemu-system-x86": "/usr/bin/qemu-system-i386"},
        qemu_args=("-m 2048", "-smp 2"), linux=kernels.MAINLINE),
    "x86_64": KunitTarget(
        name="x86_64", arch="x86_64", suites=("memcpy_nontemporal", "zone_device_memmap"),
        packages={"qemu-system-x86": "/usr/bin/qemu-system-x86_64"},
        qemu_args=("-m 3072", "-smp 2"), must_say=POINTER_ENCODING, linux=kernels.MAINLINE),
}
TARGETS_BY_KERNEL = {kernels.LTS.version: TARGETS, kernels.MAINLINE.version: MAINLINE_TARGETS}


def kunit_command(target: KunitTarget, tree: Path, jobs: int) -> list[str]:
    cmd = [sys.executable, str(tree / "tools/testing/kunit/kunit.py"), "run",
           f"--arch={target.arch}", f"--kunitconfig={target.kunitconfig}",
           *(f"--kunitconfig={KUNIT_CONFIG_DIR / name}" for name in target.extra_kunitconfigs),
           f"--build_dir={target.build_dir}", f"--jobs={jobs}", "--timeout=3600",
           f"--make_options=CC=ccache {target.cross_compile}gcc", "--raw_output=all"]
    if target.cross_compile:
        cmd.append(f"--cross_compile={target.cross_compile}")
    cmd += [f"--qemu_args={arg}" for arg in target.qemu_args]
    cmd += [f"--kernel_args={arg}" for arg in target.kernel_args]
    return cmd


def run_target(target: KunitTarget, tree: Path, jobs: int) -> ktap.KunitReport:
    deps.ensure({**deps.KERNEL_BUILD, **target.packages})
    target.build_dir.mkdir(parents=True, exist_ok=True)
    log = target.log
    qemu = vm.tcg_only_qemu(target.build_dir.parent / "qemu-tcg", QEMU_ARCHES.get(target.arch, []))
    env = dict(os.environ, **build.ccache_env(), PATH=f"{qemu}{os.pathsep}{os.environ['PATH']}")
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
        rc = proc.stream(cmd, f"kunit.py run --arch={target.arch}", log=log, cwd=tree, env=env)
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


def check(target: KunitTarget, report: ktap.KunitReport, log_text: str = "") -> list[str]:
    problems = [f"{target.name}: {p}" for p in ktap.gate(report, target.suites, must_pass=target.must_pass)]
    if target.must_say and target.must_say not in log_text:
        problems.append(f"{target.name}: the suites never said '{target.must_say}'")
    if target.fallback_reason and f"# SKIP {target.fallback_reason}" not in log_text:
        problems.append(f"{target.name}: no case skipped with '{target.fallback_reason}': "
                        "the fast path ran, or its cases passed without it")
    return problems


def check_configs(names: list[str], jobs: int | None = None, linux: Linux = kernels.LTS) -> None:
    targets = TARGETS_BY_KERNEL[linux.version]
    compile_targets = compile_checks.COMPILE_TARGETS_BY_KERNEL[linux.version]
    known = groups(linux)["all"]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise MeminitError(f"unknown target {', '.join(unknown)} on Linux {linux.version}: choose "
                           f"from {', '.join(known)}")
    tree = source.prepare_trees(linux).series
    jobs = jobs or os.cpu_count() or 1
    problems: list[str] = []
    compiled: list[compile_checks.CompileResult] = []
    for name in (n for n in names if n in compile_targets):
        try:
            result = compile_checks.compile_target(compile_targets[name], tree, jobs)
        except MeminitError as error:  # the other configs still tell what they can
            problems.append(f"{name}: {error}")
            continue
        compiled.append(result)
        problems += result.warnings
    if compiled:
        print(compile_checks.compile_matrix(compiled))
    for name in (n for n in names if n in targets):
        target = targets[name]
        report = run_target(target, tree, jobs)
        print(f"{name}: {report.tally()}")
        problems += check(target, report, target.log.read_text(errors="replace"))
    if kunit_modules.NAME in names:
        problems += kunit_modules.run(linux, tree, jobs)
    if problems:
        raise MeminitError("check-configs failed:\n  " + "\n  ".join(problems))


def groups(linux: Linux = kernels.LTS) -> dict[str, list[str]]:
    targets = TARGETS_BY_KERNEL[linux.version]
    compile_targets = compile_checks.COMPILE_TARGETS_BY_KERNEL[linux.version]
    return {"kunit": [n for n, t in targets.items() if t.in_kunit_group], "compile": list(compile_targets),
            "all": [*targets, kunit_modules.NAME, *compile_targets]}


def expand_targets(names: list[str], linux: Linux = kernels.LTS) -> list[str]:
    """Target names with the groups kunit, compile and all expanded; none: the KUnit targets."""
    named = groups(linux)
    out = [t for n in names or ["kunit"] for t in named.get(n, [n])]
    return list(dict.fromkeys(out))
