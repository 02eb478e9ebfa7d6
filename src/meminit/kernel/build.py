"""Kernel builds: `base` (pristine) and `series` (patches/VERSION/ applied), each in its own output dir."""

from __future__ import annotations

import dataclasses
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from meminit.core import deps, kernels, paths, proc
from meminit.kernel import kconfig, source
from meminit.core.errors import MeminitError
from meminit.core.kernels import Linux

# base: the pristine kernel; series: with its patches (what `run` measures); debug: the series
# with config/debug.config (DEBUG_VM, lockdep, full preemption, NUMA), what the test
# command and check-series build.
VARIANTS = ("base", "series", "debug")
PROGRESS_EVERY_S = 20.0


@dataclass(frozen=True)
class Kernel:
    variant: str
    src: Path
    out: Path
    linux: Linux = kernels.DEFAULT
    # a tree of the user's own (own_tree): the series commit is configured as base is, with
    # the series fragment's options set only where the tree has them
    own: bool = False

    @property
    def image(self) -> Path:
        return self.out / "arch/x86/boot/bzImage"

    @property
    def localversion(self) -> str:
        return f"-meminit-{self.variant}"

    @property
    def release(self) -> str:
        return (self.out / "include/config/kernel.release").read_text().strip()


def kernel_for(variant: str, trees: source.Trees) -> Kernel:
    src = trees.base if variant == "base" else trees.series
    return Kernel(variant=variant, src=src, out=trees.linux.build_root / variant, linux=trees.linux)


def make_variables(kernel: Kernel) -> list[str]:
    """make's command-line variables for every build of the kernel (packaging passes them on)."""
    return ["CC=ccache gcc", f"LOCALVERSION={kernel.localversion}"]


def make_command(kernel: Kernel, jobs: int, targets: list[str], extra: list[str] | None = None) -> list[str]:
    return ["make", "-C", str(kernel.src), f"O={kernel.out}", f"-j{jobs}", *make_variables(kernel),
            *(extra or []), *targets]


def ccache_env() -> dict[str, str]:
    """ccache's settings for every kernel build. CCACHE_BASEDIR rewrites paths under the
    checkout to relative ones, so that another clone (a CI checkout) hits the objects this
    one compiled; with debug info (-g) ccache also hashes the working directory, the build
    directory under the clone, unless told not to: without CCACHE_NOHASHDIR a fresh
    clone missed every object of the debug kernels (2026-11-26, ccache 4.7)."""
    return {"CCACHE_DIR": str(paths.CCACHE_DIR), "CCACHE_BASEDIR": str(paths.REPO), "CCACHE_NOHASHDIR": "1"}

# kbuild's line for each object it compiles: "  CC      mm/mm_init.o" (AS for assembler, [M] in
# a module); run_make() counts them for its progress line, check-series names them
KBUILD_COMPILED = re.compile(r"^  (?:CC|AS)\s+(?:\[M\]\s+)?(\S+\.o)$", re.MULTILINE)


def run_make(kernel: Kernel, cmd: list[str], log: Path, what: str, env: dict[str, str] | None = None,
             cwd: Path | None = None) -> float:
    """Run make (or what runs it) with its output in `log`, printing a progress line now and
    then, with `env` added to the environment; returns seconds."""
    # The timestamp must parse as a date: usr/gen_initramfs.sh hands it to `date -d`.
    env = dict(os.environ, **ccache_env(),
               KBUILD_BUILD_TIMESTAMP="2024-11-17 00:00:00 UTC",
               KBUILD_BUILD_USER="meminit", KBUILD_BUILD_HOST="meminit", **(env or {}))
    start = time.monotonic()
    compiled = 0
    last_report = start

    def progress(line: str) -> None:
        nonlocal compiled, last_report
        if KBUILD_COMPILED.match(line.rstrip("\n")):
            compiled += 1
        now = time.monotonic()
        if now - last_report >= PROGRESS_EVERY_S:
            print(f"meminit: {what}: {compiled} files compiled, {now - start:.0f}s",
                  file=sys.stderr, flush=True)
            last_report = now

    rc = proc.stream(cmd, what, log=log, on_line=progress, env=env, cwd=cwd)
    elapsed = time.monotonic() - start
    if rc != 0:
        tail = "".join(log.read_text().splitlines(keepends=True)[-25:])
        raise MeminitError(f"{what} failed after {elapsed:.0f}s; last lines:\n{tail}full log: {log}")
    return elapsed


def build(kernel: Kernel, jobs: int | None = None) -> float:
    deps.ensure(deps.KERNEL_BUILD)
    if kernel.own:
        required = kconfig.fragments_for("base", kernel.linux)
        wished = [f for f in kconfig.fragments_for(kernel.variant, kernel.linux) if f not in required]
        try:
            kconfig.configure(kernel.src, kernel.out, required, optional=wished)
        except MeminitError as exc:
            raise MeminitError(f"the {kernel.variant} commit of --tree lacks what meminit's guests "
                               f"need: {exc}") from None
    else:
        kconfig.configure(kernel.src, kernel.out, kconfig.fragments_for(kernel.variant, kernel.linux))
    jobs = jobs or os.cpu_count() or 1
    print(f"meminit: building {kernel.variant} kernel ({kernel.src.name} -> {kernel.out}), -j{jobs}",
          file=sys.stderr, flush=True)
    elapsed = run_make(kernel, make_command(kernel, jobs, ["bzImage", "modules"]),
                       kernel.out / "build.log", f"build {kernel.variant}")
    print(f"meminit: built {kernel.variant} kernel {kernel.release} in {elapsed:.0f}s",
          file=sys.stderr, flush=True)
    return elapsed


def check_variants(variants: list[str], own: bool = False) -> None:
    """Refuse a kernel name that is not a variant (`own`: of a tree of the user's own, whose
    commits give base and series only)."""
    allowed = ("base", "series") if own else VARIANTS
    unknown = [v for v in variants if v not in allowed]
    if unknown:
        raise MeminitError(f"unknown kernel {', '.join(unknown)}: choose from {', '.join(allowed)}"
                           + (" (a --tree builds its --base and --series commits)" if own else ""))


def build_trees(variants: list[str], trees: source.Trees, jobs: int | None = None,
                own: bool = False) -> dict[str, Kernel]:
    """Build `variants` of prepared trees (`own`: a tree of the user's own, base and series only)."""
    check_variants(variants, own)
    built = {}
    for variant in variants:
        kernel = dataclasses.replace(kernel_for(variant, trees), own=own)
        build(kernel, jobs)
        built[variant] = kernel
    return built


def build_variants(variants: list[str], reset: bool = False, jobs: int | None = None,
                   linux: Linux = kernels.DEFAULT) -> dict[str, Kernel]:
    check_variants(variants)  # before the trees are prepared
    return build_trees(variants, source.prepare_trees(linux, reset=reset), jobs)
