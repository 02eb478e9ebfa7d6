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

Compile targets boot nothing: the directories the series touches are compiled with W=1
under configs our KUnit targets do not cover (Debian's own amd64 config, allnoconfig
plus ZONE_DEVICE, allmodconfig with its sanitisers, KMSAN with clang, riscv64), failing on an error or on
a warning in a line the series adds, and reporting which touched files each config
compiles.
"""

from __future__ import annotations

import argparse
import lzma
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from meminit import build, checks, deps, kconfig, kernels, ktap, paths, proc, source, tables, units, vm
from meminit.errors import MeminitError
from meminit.kernels import Linux

PROGRESS_EVERY_S = 30.0
# the QEMU kunit.py starts per ARCH (um runs none)
QEMU_ARCHES = {"arm64": ["aarch64"], "i386": ["i386"], "x86_64": ["x86_64"]}
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
    # a skip reason the log must show: the suite reporting that a fast path is off
    fallback_reason: str = ""
    # cases that must pass, not skip: what the target exists to run
    must_pass: tuple[str, ...] = ()
    # a line the suites must print: what the target exists to run, e.g. an encoding
    must_say: str = ""
    in_kunit_group: bool = True  # check-configs' default group; the rest by name or in `all`
    linux: Linux = kernels.LTS

    @property
    def kunitconfig(self) -> Path:
        """config/VERSION/kunit/NAME.kunitconfig where the kernel has its own, else
        config/kunit/NAME.kunitconfig (6.12's, and what every kernel shares)."""
        own = self.linux.own_config("kunit", f"{self.name}.kunitconfig")
        return own if own.exists() else KUNIT_CONFIG_DIR / f"{self.name}.kunitconfig"

    @property
    def build_dir(self) -> Path:
        return self.linux.build_root / f"kunit-{self.name}"

    @property
    def log(self) -> Path:
        return self.linux.build_root / f"kunit-{self.name}.log"


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
        qemu_args=("-m 2048", "-smp 2"), in_kunit_group=False),
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
        fallback_reason="the fast memmap init is off under KASAN/KMSAN", in_kunit_group=False),
}

# On 7.3 the clearing suites are upstream's; what runs is ours: the generic and the x86
# memcpy_nontemporal(), and the memmap suite with the head-pointer encoding of compound
# tails (arm64 has no HVO; the x86-64 target leaves HUGETLBFS out, so it has none either),
# where the debug kernel of the test command has the mask.
POINTER_ENCODING = "compound tails hold a head pointer"
MAINLINE_TARGETS = {
    "um": KunitTarget(name="um", arch="um", suites=("memcpy_nontemporal",), linux=kernels.MAINLINE, in_kunit_group=False),
    "arm64": KunitTarget(
        name="arm64", arch="arm64", suites=("memcpy_nontemporal", "zone_device_memmap"),
        cross_compile="aarch64-linux-gnu-",
        packages={"gcc-aarch64-linux-gnu": "/usr/bin/aarch64-linux-gnu-gcc",
                  "qemu-system-arm": "/usr/bin/qemu-system-aarch64"},
        qemu_args=("-m 3072", "-smp 2"), must_say=POINTER_ENCODING, linux=kernels.MAINLINE),
    "i386": KunitTarget(
        name="i386", arch="i386", suites=("memcpy_nontemporal",),
        packages={"qemu-system-x86": "/usr/bin/qemu-system-i386"},
        qemu_args=("-m 2048", "-smp 2"), linux=kernels.MAINLINE, in_kunit_group=False),
    "x86_64": KunitTarget(
        name="x86_64", arch="x86_64", suites=("memcpy_nontemporal", "zone_device_memmap"),
        packages={"qemu-system-x86": "/usr/bin/qemu-system-x86_64"},
        qemu_args=("-m 3072", "-smp 2"), must_say=POINTER_ENCODING, linux=kernels.MAINLINE),
}
TARGETS_BY_KERNEL = {kernels.LTS.version: TARGETS, kernels.MAINLINE.version: MAINLINE_TARGETS}


COMPILE_CONFIG_DIR = paths.CONFIG_DIR / "compile"
DEBIAN_AMD64_CONFIG = Path("/usr/src/linux-config-6.12/config.amd64_none_amd64.xz")


@dataclass(frozen=True)
class CompileTarget:
    """A config under which the touched directories are compiled (W=1), nothing booted.

    `base` is what `make` starts from (allnoconfig, allmodconfig, defconfig) or a config
    file (xz-compressed ones too); config/compile/NAME.config, if any, is laid over it and
    every option it sets must survive olddefconfig."""

    name: str
    arch: str  # make's ARCH
    base: str | Path
    cross_compile: str = ""
    llvm: str = ""  # clang and LLVM's tools instead of gcc: make's LLVM= version suffix, e.g. "-16"
    packages: dict[str, str] = field(default_factory=dict)

    @property
    def compiler(self) -> str:
        return f"clang{self.llvm}" if self.llvm else f"{self.cross_compile}gcc"

    @property
    def fragment(self) -> Path:
        return COMPILE_CONFIG_DIR / f"{self.name}.config"

    @property
    def build_dir(self) -> Path:
        return paths.BUILD_ROOT / f"compile-{self.name}"

    @property
    def srcarch(self) -> str:
        return "x86" if self.arch in ("x86_64", "i386") else self.arch


COMPILE_TARGETS = {
    "debian-amd64": CompileTarget("debian-amd64", "x86_64", DEBIAN_AMD64_CONFIG,
                                  packages={"linux-config-6.12": str(DEBIAN_AMD64_CONFIG)}),
    "allnoconfig-zone-device": CompileTarget("allnoconfig-zone-device", "x86_64", "allnoconfig"),
    "allmodconfig": CompileTarget("allmodconfig", "x86_64", "allmodconfig"),
    "riscv64": CompileTarget("riscv64", "riscv", "defconfig", cross_compile="riscv64-linux-gnu-",
                             packages={"gcc-riscv64-linux-gnu": "/usr/bin/riscv64-linux-gnu-gcc"}),
    # KMSAN needs clang: bookworm's clang-16, with LLVM's linker and binutils
    "kmsan": CompileTarget("kmsan", "x86_64", "defconfig", llvm="-16",
                           packages={"clang-16": "/usr/bin/clang-16", "lld-16": "/usr/bin/ld.lld-16",
                                     "llvm-16": "/usr/bin/llvm-ar-16"}),
}


# 7.3's compile targets are not ported yet (issue 34)
COMPILE_TARGETS_BY_KERNEL = {kernels.LTS.version: COMPILE_TARGETS, kernels.MAINLINE.version: {}}


def touched_dirs(objects: list[str], srcarch: str) -> list[str]:
    """Directories of the touched objects, other architectures' left out."""
    dirs = {str(Path(o).parent) for o in objects}
    return sorted(d for d in dirs if not d.startswith("arch/") or d.startswith(f"arch/{srcarch}/"))


def _make(target: CompileTarget, tree: Path, jobs: int, args: list[str]) -> list[str]:
    toolchain = [f"LLVM={target.llvm}"] if target.llvm else [f"CROSS_COMPILE={target.cross_compile}"]
    return ["make", "-C", str(tree), f"O={target.build_dir}", f"-j{jobs}", f"ARCH={target.arch}",
            *toolchain, f"CC=ccache {target.compiler}", *args]


def configure_compile(target: CompileTarget, tree: Path, jobs: int) -> None:
    """Write the target's .config; fails naming every fragment option olddefconfig dropped."""
    out = target.build_dir
    out.mkdir(parents=True, exist_ok=True)
    fragment = target.fragment if target.fragment.exists() else None
    kernel = build.Kernel(target.name, tree, out)

    def make_config(step: str, *args: str) -> None:
        build.run_make(kernel, _make(target, tree, jobs, list(args)), out / f"configure-{step}.log",
                       f"{target.name}: {step}")

    if isinstance(target.base, Path):
        opener = lzma.open if target.base.suffix == ".xz" else open
        with opener(target.base, "rt") as config:
            text = config.read()
        (out / ".config").write_text(text + (fragment.read_text() if fragment else ""))
        make_config("olddefconfig", "olddefconfig")
    elif target.base in ("allnoconfig", "allmodconfig"):
        allconfig = [f"KCONFIG_ALLCONFIG={fragment}"] if fragment else []
        make_config(target.base, *allconfig, target.base)
    else:
        make_config(target.base, target.base)
        if fragment:
            with (out / ".config").open("a") as config:
                config.write(fragment.read_text())
            make_config("olddefconfig", "olddefconfig")
    if fragment:
        final = kconfig.parse_config((out / ".config").read_text())
        dropped = kconfig.dropped_options(kconfig.parse_config(fragment.read_text()), final)
        if dropped:
            raise MeminitError(f"{target.name}: {fragment} options did not survive: {', '.join(dropped)}")


@dataclass
class CompileResult:
    target: str
    compiled: list[str]  # touched files compiled under this config
    not_selected: list[str]  # touched files of the compiled directories the config leaves out
    warnings: list[str]  # W=1 warnings on lines the series adds
    seconds: float


def compile_target(target: CompileTarget, tree: Path, jobs: int) -> CompileResult:
    deps.ensure({**deps.KERNEL_BUILD, **target.packages})
    start = time.monotonic()
    configure_compile(target, tree, jobs)
    rev_range = f"{source.BASE_TAG}..HEAD"
    touched = checks.touched_objects(tree, rev_range)
    dirs = touched_dirs(touched, target.srcarch)
    objects = [o for o in touched if str(Path(o).parent) in dirs]
    for obj in objects:  # W=1 on an object already built would not recompile it
        (target.build_dir / obj).unlink(missing_ok=True)
    log = target.build_dir / "compile.log"
    print(f"meminit: {target.name}: compiling {', '.join(d + '/' for d in dirs)} with W=1; log: {log}",
          file=sys.stderr, flush=True)
    build.run_make(build.Kernel(target.name, tree, target.build_dir),
                   _make(target, tree, jobs, ["W=1", *(d + "/" for d in dirs)]), log,
                   f"{target.name}: W=1 compile")
    warnings = checks.new_warnings(log.read_text(errors="replace"), checks.added_lines(tree, rev_range))
    compiled = [o for o in objects if (target.build_dir / o).exists()]
    return CompileResult(target.name, compiled, [o for o in objects if o not in compiled],
                         [f"{target.name}: {w}" for w in warnings], time.monotonic() - start)


def compile_matrix(results: list[CompileResult]) -> str:
    """Touched file x config: compiled (W=1 clean on added lines) or not selected."""
    files = sorted({f for r in results for f in r.compiled + r.not_selected})
    header = ["touched file", *(r.target for r in results)]
    rows = [[f, *("built" if f in r.compiled else "not selected" if f in r.not_selected else "-"
                  for r in results)] for f in files]
    rows.append(["seconds", *(f"{r.seconds:.0f}" for r in results)])
    return tables.render_table(header, rows)


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


def run_target(target: KunitTarget, tree: Path, jobs: int) -> ktap.KunitReport:
    deps.ensure({**deps.KERNEL_BUILD, **target.packages})
    target.build_dir.mkdir(parents=True, exist_ok=True)
    log = target.log
    qemu = vm.tcg_only_qemu(target.build_dir.parent / "qemu-tcg", QEMU_ARCHES.get(target.arch, []))
    env = dict(os.environ, CCACHE_DIR=str(paths.CCACHE_DIR), CCACHE_BASEDIR=str(paths.REPO),
               PATH=f"{qemu}{os.pathsep}{os.environ['PATH']}")
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
    targets, compile_targets = TARGETS_BY_KERNEL[linux.version], COMPILE_TARGETS_BY_KERNEL[linux.version]
    unknown = [n for n in names if n not in targets and n not in compile_targets]
    if unknown:
        raise MeminitError(f"unknown target {', '.join(unknown)} on Linux {linux.version}: choose "
                           f"from {', '.join([*targets, *compile_targets])}"
                           + ("" if compile_targets else " (its compile targets are not ported yet)"))
    tree = source.prepare_trees(linux).series
    jobs = jobs or os.cpu_count() or 1
    problems: list[str] = []
    compiled: list[CompileResult] = []
    for name in (n for n in names if n in COMPILE_TARGETS):
        try:
            result = compile_target(COMPILE_TARGETS[name], tree, jobs)
        except MeminitError as error:  # the other configs still tell what they can
            problems.append(f"{name}: {error}")
            continue
        compiled.append(result)
        problems += result.warnings
    if compiled:
        print(compile_matrix(compiled))
    for name in (n for n in names if n in targets):
        target = targets[name]
        report = run_target(target, tree, jobs)
        skipped = [f"{c.suite}.{c.name}" for c in report.cases if c.status == "SKIP"]
        print(f"{name}: {sum(c.status == 'PASS' for c in report.cases)} passed, "
              f"{len(report.failed())} failed, {len(skipped)} skipped"
              + (f" ({', '.join(skipped)})" if skipped else ""))
        problems += check(target, report, target.log.read_text(errors="replace"))
    if problems:
        raise MeminitError("check-configs failed:\n  " + "\n  ".join(problems))


def groups(linux: Linux = kernels.LTS) -> dict[str, list[str]]:
    targets, compile_targets = TARGETS_BY_KERNEL[linux.version], COMPILE_TARGETS_BY_KERNEL[linux.version]
    return {"kunit": [n for n, t in targets.items() if t.in_kunit_group], "compile": list(compile_targets),
            "all": [*targets, *compile_targets]}


def expand_targets(names: list[str], linux: Linux = kernels.LTS) -> list[str]:
    """Target names with the groups kunit, compile and all expanded; none: the KUnit targets."""
    named = groups(linux)
    out = [t for n in names or ["kunit"] for t in named.get(n, [n])]
    return list(dict.fromkeys(out))


def _cmd_check_configs(args: argparse.Namespace) -> int:
    linux = kernels.from_args(args)
    check_configs(expand_targets(args.targets, linux), args.jobs, linux)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check-configs",
                       help="build and run the series' KUnit suites on ARCH=um, arm64, i386 and "
                            "x86-64 without a virtual memmap (kunit.py); compile the touched "
                            "directories under Debian's config, allnoconfig, allmodconfig, riscv64")
    p.add_argument("targets", nargs="*", metavar="TARGET",
                   help=f"KUnit: {', '.join(TARGETS)} (group 'kunit', the default); compile "
                        f"only: {', '.join(COMPILE_TARGETS)} (group 'compile'); 'all' for both")
    p.add_argument("-j", "--jobs", type=units.integer(), help="parallel jobs (default: number of CPUs)")
    kernels.add_option(p)
    p.set_defaults(func=_cmd_check_configs)
