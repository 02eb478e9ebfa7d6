"""check-configs' compile targets: the directories the series touches, compiled with W=1.

Nothing boots: each target configures a tree of the series (Debian's own amd64 config,
and that config with KUnit as modules but without the core's suite, allnoconfig plus
ZONE_DEVICE, allmodconfig with its sanitisers, riscv64's defconfig, x86-64's defconfig with
KMSAN and clang), compiles the touched directories with W=1, fails on an error or on a
warning in a line the series adds (and, where the suite is off, on a KUnit hook of the core
left in an object: kunit_hooks.py), and says which touched files each config compiles.
Each kernel has its own targets: Debian's config comes from the kernel's own linux-config
package (6.12's from the machine's apt sources, 7.3's fetched privately
from trixie-backports like its source), and KMSAN's clang is the one the kernel accepts.
"""

from __future__ import annotations

import lzma
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from meminit.core import deps, kernels, paths, tables
from meminit.kernel import build, checks, kconfig, kunit_hooks, parts, source
from meminit.core.errors import MeminitError
from meminit.core.kernels import Linux

COMPILE_CONFIG_DIR = paths.CONFIG_DIR / "compile"
DEBIAN_CONFIG = "config.amd64_none_amd64.xz"


def config_package(linux: Linux) -> str:
    return f"linux-config-{linux.version}"


def _config_root(linux: Linux) -> Path:
    """Where the kernel's linux-config package is: installed (/), or fetched and unpacked."""
    return paths.WORK / "sources" / f"{linux.version}-config" if linux.suite else Path("/")


def debian_config_path(linux: Linux) -> Path:
    """Where debian_config() finds Debian's amd64 config of the kernel, nothing installed or
    fetched yet (`package --config debian` asks for the package with its build tools)."""
    return _config_root(linux) / "usr" / "src" / config_package(linux) / DEBIAN_CONFIG


def debian_config(linux: Linux) -> Path:
    """Debian's amd64 config of the kernel's own linux-config package: installed from the
    machine's apt sources (6.12) or fetched like the kernel's source (7.3), then unpacked."""
    package, path = config_package(linux), debian_config_path(linux)
    if not linux.suite:
        deps.ensure({package: str(path)})
        return path
    if not path.exists():
        source.fetch_unpacked(package, linux, _config_root(linux), path)
    return path


@dataclass(frozen=True)
class CompileTarget:
    """A config under which the touched directories are compiled (W=1), nothing booted.

    `base` is what `make` starts from (allnoconfig, allmodconfig, defconfig, or "debian":
    the kernel's Debian amd64 config); config/compile/NAME.config, if any (a kernel's own
    in config/VERSION/compile/), is laid over it and every option it sets must survive
    olddefconfig."""

    name: str
    arch: str  # make's ARCH
    base: str
    cross_compile: str = ""
    llvm: str = ""  # clang and LLVM's tools instead of gcc: make's LLVM= version suffix, e.g. "-16"
    packages: dict[str, str] = field(default_factory=dict)
    linux: Linux = kernels.LTS
    # the config has KUnit but not the core's suite: no object may keep the core's KUnit hooks
    hooks_hidden: bool = False

    @property
    def compiler(self) -> str:
        return f"clang{self.llvm}" if self.llvm else f"{self.cross_compile}gcc"

    @property
    def fragment(self) -> Path:
        return self.linux.config("compile", f"{self.name}.config")

    @property
    def build_dir(self) -> Path:
        return self.linux.build_root / f"compile-{self.name}"

    @property
    def srcarch(self) -> str:
        return "x86" if self.arch in ("x86_64", "i386") else self.arch


def _llvm(version: int) -> dict[str, str]:
    return {f"clang-{version}": f"/usr/bin/clang-{version}", f"lld-{version}": f"/usr/bin/ld.lld-{version}",
            f"llvm-{version}": f"/usr/bin/llvm-ar-{version}"}


def _targets(linux: Linux, llvm: int) -> dict[str, CompileTarget]:
    return {
        "debian-amd64": CompileTarget("debian-amd64", "x86_64", "debian", linux=linux),
        "debian-kunit-off": CompileTarget("debian-kunit-off", "x86_64", "debian", linux=linux, hooks_hidden=True),
        "allnoconfig-zone-device": CompileTarget("allnoconfig-zone-device", "x86_64", "allnoconfig", linux=linux),
        "allmodconfig": CompileTarget("allmodconfig", "x86_64", "allmodconfig", linux=linux),
        "riscv64": CompileTarget("riscv64", "riscv", "defconfig", cross_compile="riscv64-linux-gnu-",
                                 packages={"gcc-riscv64-linux-gnu": "/usr/bin/riscv64-linux-gnu-gcc"}, linux=linux),
        # KMSAN needs clang, with LLVM's linker and binutils
        "kmsan": CompileTarget("kmsan", "x86_64", "defconfig", llvm=f"-{llvm}", packages=_llvm(llvm), linux=linux),
    }


# 7.3 wants clang 17 or later: bookworm's clang-19, where 6.12 keeps bookworm's default clang-16
COMPILE_TARGETS = _targets(kernels.LTS, 16)
MAINLINE_COMPILE_TARGETS = _targets(kernels.MAINLINE, 19)
COMPILE_TARGETS_BY_KERNEL = {kernels.LTS.version: COMPILE_TARGETS,
                             kernels.MAINLINE.version: MAINLINE_COMPILE_TARGETS}


def touched_dirs(objects: list[str], srcarch: str) -> list[str]:
    """Directories of the touched objects, other architectures' left out."""
    dirs = {str(Path(o).parent) for o in objects}
    return sorted(d for d in dirs if not d.startswith("arch/") or d.startswith(f"arch/{srcarch}/"))


def make_command(target: CompileTarget, tree: Path, jobs: int, args: list[str]) -> list[str]:
    toolchain = [f"LLVM={target.llvm}"] if target.llvm else [f"CROSS_COMPILE={target.cross_compile}"]
    return ["make", "-C", str(tree), f"O={target.build_dir}", f"-j{jobs}", f"ARCH={target.arch}",
            *toolchain, f"CC=ccache {target.compiler}", *args]


def configure_compile(target: CompileTarget, tree: Path, jobs: int) -> None:
    """Write the target's .config; fails naming every fragment option olddefconfig dropped."""
    out = target.build_dir
    out.mkdir(parents=True, exist_ok=True)
    fragment = target.fragment if target.fragment.exists() else None
    kernel = build.Kernel(target.name, tree, out, target.linux)

    def make_config(step: str, *args: str) -> None:
        build.run_make(kernel, make_command(target, tree, jobs, list(args)), out / f"configure-{step}.log",
                       f"{target.name}: {step}")

    if target.base == "debian":
        with lzma.open(debian_config(target.linux), "rt") as config:
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
    build.run_make(build.Kernel(target.name, tree, target.build_dir, target.linux),
                   make_command(target, tree, jobs, ["W=1", *(d + "/" for d in dirs)]), log,
                   f"{target.name}: W=1 compile")
    warnings = checks.new_warnings(log.read_text(errors="replace"), checks.added_lines(tree, rev_range))
    compiled = [o for o in objects if (target.build_dir / o).exists()]
    if target.hooks_hidden:
        hooks = kunit_hooks.core_hooks(parts.read_series(target.linux.patches / parts.CORE))
        warnings += kunit_hooks.hidden_problems(target.build_dir, compiled, hooks)
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
