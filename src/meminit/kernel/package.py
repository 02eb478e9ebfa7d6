"""`meminit package`: the series as Debian kernel packages (linux-image, linux-headers) to install.

The kernel's own `make bindeb-pkg` does the packaging, with one change: its `debian`
step writes a changelog saying only "Custom built Linux kernel.", so this runs that step,
writes a changelog entry naming the source package, the series commit and every patch,
and then runs the rest of bindeb-pkg's recipe (scripts/Makefile.package) itself. The
version is Debian's source version plus `+meminit.<series commit>`, e.g.
6.12.117-1~deb12u1+meminit.83c676362abc.

Configs: `meminit` (the `run` kernels' tinyconfig + fragments: fast to build, boots a
QEMU guest, not most real machines), `debug` (the test command's kernel), `debian`
(Debian's own amd64 config from linux-config-6.12, what a user of Debian's kernel would
install, with the series' options laid over it), or a config file.
"""

from __future__ import annotations

import lzma
import os
import shutil
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from meminit.core import deps, kernels, paths, proc
from meminit.kernel import build, compile_checks, kconfig, source
from meminit.core.errors import MeminitError
from meminit.core.units import GIB, format_size

PACKAGING = {
    "dpkg-dev": "/usr/bin/dpkg-buildpackage",
    "debhelper": "/usr/bin/dh_prep",
}
PACKAGES_DIR = paths.WORK / "packages"
MAINTAINER = ("meminit developers", "meminit@localhost")
# Free space a build needs in work/, checked before it starts. Our configs' build trees
# take 194 and 342 MiB (work/build/series and debug, 2026-11-24), their packages less;
# a distribution config builds every driver as a module: a guard, not a measurement.
SPACE_NEEDED = {"meminit": 2 * GIB, "debug": 2 * GIB}
SPACE_NEEDED_FULL = 30 * GIB
PACKAGE_FRAGMENT = paths.CONFIG_DIR / "package.config"
# Debian's config without debug info: the -dbg package alone would be gigabytes and hours
# of the build (Debian ships it apart too); BTF needs it, so it goes too. linux-config-6.12
# already leaves out Debian's trusted and signing keys: modules are signed with a key
# made at build time.
DEBIAN_OVERRIDES = """
CONFIG_DEBUG_INFO_NONE=y
CONFIG_DEBUG_INFO_DWARF_TOOLCHAIN_DEFAULT=n
CONFIG_DEBUG_INFO_BTF=n
"""
BUILT_IN_NAMES = ("meminit", "debug", "debian", "base", "series")


@dataclass(frozen=True)
class PackageConfig:
    name: str  # meminit, debug, debian, or the file's stem
    kernel: build.Kernel
    base_config: Path | None  # a config file to start from; None: tinyconfig + fragments
    with_series: bool = True  # False: the pristine source, the base line to compare with


def config_for(choice: str, trees: source.Trees, with_series: bool = True) -> PackageConfig:
    if choice in ("meminit", "debug"):
        if not with_series and choice == "debug":
            raise MeminitError("--base: the debug config needs the series (config/debug.config sets its options)")
        variant = "base" if not with_series else "series" if choice == "meminit" else "debug"
        return PackageConfig(choice, build.kernel_for(variant, trees), None, with_series)
    if choice == "debian":
        base = compile_checks.debian_config_path(kernels.LTS)
    else:
        base = Path(choice)
        if not base.is_file():
            raise MeminitError(f"--config takes meminit, debug, debian or a config file; no file {choice}")
    if choice == "debian":
        name = "debian"
    else:
        if "CONFIG_X86_64=y" not in read_config(base):
            raise MeminitError(f"{base} is not an x86-64 config (no CONFIG_X86_64=y): packages are built for amd64")
        name = re.sub(r"[^a-z0-9.+-]+", "-", base.name.removesuffix(".xz").removesuffix(".config").lower()).strip("-")
        name = f"file-{name}" if name in BUILT_IN_NAMES or not name else name
    variant = name if with_series else f"{name}-base"
    kernel = build.Kernel(variant, trees.series if with_series else trees.base, paths.BUILD_ROOT / f"package-{variant}")
    return PackageConfig(name, kernel, base, with_series)


def read_config(path: Path) -> str:
    opener = lzma.open if path.suffix == ".xz" else open
    with opener(path, "rt") as f:
        return f.read()


def package_version(source_version: str, commit: str, committed: int, with_series: bool = True) -> str:
    """Debian's version of the source, then the commit's time (UTC), so a later build of the
    series sorts after an earlier one, then the commit: <source>+meminit.<YYYYmmddHHMMSS>.<commit>."""
    stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime(committed))
    return f"{source_version}+meminit.{'' if with_series else 'base.'}{stamp}.{commit[:12]}"


def version_of(tree: Path, with_series: bool = True) -> str:
    """package_version() of the tree's HEAD."""
    committed = int(source.git(tree, "log", "-1", "--format=%ct").strip())
    return package_version(source.source_version(), source.series_commit(tree), committed, with_series)


def makeflags(overrides: list[str]) -> str:
    """make's command-line variables as MAKEFLAGS carries them to a make run further down."""
    return " ".join(o.replace(" ", "\\ ") for o in overrides)


def changelog_entry(first_line: str, trailer: str, source_version: str, commit: str,
                    config: str, subjects: list[str] | None) -> str:
    """mkdebian's changelog with its body ("Custom built Linux kernel.") replaced by ours;
    subjects None: the base line, the source without the series."""
    if subjects is None:
        body = [f"  * {kernels.LTS.source_package} {source_version} without the meminit series (the",
                f"    base line to measure it against), commit {commit[:12]}, config {config}."]
    else:
        body = [f"  * {kernels.LTS.source_package} {source_version} with the meminit series,",
                f"    commit {commit[:12]}, config {config}:"]
        body += [f"    - {subject}" for subject in subjects]
    return "\n".join([first_line, "", *body, "", trailer]) + "\n"


def preflight(config: PackageConfig) -> None:
    """Say before building what would stop the build: packages, config file, disk space."""
    # the package is of the LTS, whose source package the machine's apt sources install
    needed = {**deps.KERNEL_BUILD, **PACKAGING, kernels.LTS.source_package: str(kernels.LTS.tarball)}
    if config.name == "debian":
        needed[compile_checks.config_package(kernels.LTS)] = str(compile_checks.debian_config_path(kernels.LTS))
    deps.ensure(needed)
    # a built tree is only relinked and packaged
    built = (config.kernel.out / "vmlinux").exists()
    space = SPACE_NEEDED["meminit"] if built else SPACE_NEEDED.get(config.name, SPACE_NEEDED_FULL)
    paths.WORK.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(paths.WORK).free
    if free < space:
        raise MeminitError(f"a {config.name} package build needs about {format_size(space)} free in "
                           f"{paths.WORK}; there are {format_size(free)}")


def build_kernel(config: PackageConfig, jobs: int) -> None:
    """The kernel as `build` builds it, so that packaging only relinks (its version string)."""
    if config.base_config is None:
        build.build(config.kernel, jobs)
        return
    configure_from_file(config)
    kernel = config.kernel
    print(f"meminit: building {config.name} kernel ({kernel.out}), -j{jobs}", file=sys.stderr, flush=True)
    elapsed = build.run_make(kernel, build.make_command(kernel, jobs, ["bzImage", "modules"]),
                             kernel.out / "build.log", f"build {config.name}")
    print(f"meminit: built {config.name} kernel {kernel.release} in {elapsed:.0f}s", file=sys.stderr, flush=True)


def configure_from_file(config: PackageConfig) -> None:
    """The config file with local keys and no debug info, and the series' options over it."""
    kernel = config.kernel
    assert config.base_config is not None
    wanted = PACKAGE_FRAGMENT.read_text() + (series_options() if config.with_series else "")
    overrides = DEBIAN_OVERRIDES if config.name == "debian" else ""
    kernel.out.mkdir(parents=True, exist_ok=True)
    kconfig.reconfigure(kernel.src, kernel.out, read_config(config.base_config) + overrides + wanted)
    dropped = kconfig.dropped_options(kconfig.parse_config(wanted),
                                      kconfig.parse_config((kernel.out / ".config").read_text()))
    if dropped:
        raise MeminitError(f"{config.base_config} cannot carry the options of {PACKAGE_FRAGMENT.name}"
                           f"{' and the series' if config.with_series else ''}: {', '.join(dropped)}")


def series_options() -> str:
    """config/series.config (and the kernel's own) without its KUnit suites: a real machine's
    kernel does not run them."""
    fragments = [f for f in kconfig.fragments_for("series") if f.name == kconfig.SERIES_FRAGMENT.name]
    return "".join(line for f in fragments for line in f.read_text().splitlines(keepends=True)
                   if "_KUNIT_TEST=" not in line)


def package(choice: str, jobs: int | None = None, with_series: bool = True) -> list[Path]:
    """Build the packages; their paths, moved to work/packages/<release>/."""
    trees = source.prepare_trees()
    config = config_for(choice, trees, with_series)
    preflight(config)
    kernel, jobs = config.kernel, jobs or os.cpu_count() or 1
    build_kernel(config, jobs)
    version, commit = source.source_version(), source.series_commit(kernel.src)
    pkg_version = version_of(kernel.src, config.with_series)
    source_name = f"linux-meminit-{kernel.variant}"
    subjects = source.git(kernel.src, "log", "--reverse", "--format=%s",
                          f"{source.BASE_TAG}..HEAD").splitlines() if config.with_series else None
    env = {"KDEB_PKGVERSION": pkg_version, "KDEB_SOURCENAME": source_name,
           "DEBFULLNAME": MAINTAINER[0], "DEBEMAIL": MAINTAINER[1], "KBUILD_VERBOSE": "0"}
    # bindeb-pkg's `debian` step: scripts/package/mkdebian in the build's environment
    build.run_make(kernel, build.make_command(kernel, jobs, [
        "run-command", "KBUILD_RUN_COMMAND=$(srctree)/scripts/package/mkdebian"]),
        kernel.out / "debian.log", f"package {config.name}: debian/", env)
    changelog = kernel.out / "debian" / "changelog"
    lines = changelog.read_text().splitlines()
    changelog.write_text(changelog_entry(lines[0], next(x for x in lines if x.startswith(" -- ")),
                                         version, commit, config.name, subjects))
    without_libc_dev(kernel.out / "debian" / "control")
    arch = (kernel.out / "debian" / "arch").read_text().strip()
    release = kernel.release
    made = [kernel.out.parent / f"{name}_{pkg_version}_{arch}.{kind}" for name, kind in (
        (f"linux-image-{release}", "deb"), (f"linux-image-{release}-dbg", "deb"),
        (f"linux-headers-{release}", "deb"), (source_name, "buildinfo"), (source_name, "changes"))]
    for old in made:
        old.unlink(missing_ok=True)
    print(f"meminit: packaging {config.name} kernel {pkg_version} with -j{jobs}; log: "
          f"{kernel.out / 'package.log'}", file=sys.stderr, flush=True)
    # bindeb-pkg's recipe (scripts/Makefile.package) without its `debian` step, which
    # would write the changelog again; make's variables reach debian/rules through MAKEFLAGS
    elapsed = build.run_make(
        kernel, ["dpkg-buildpackage", "--build=binary", "--no-pre-clean", "--unsigned-changes",
                 "-Rmake -f debian/rules", f"-j{jobs}", f"-a{arch}", "--no-check-builddeps"],
        kernel.out / "package.log", f"package {config.name}",
        {**env, "MAKEFLAGS": makeflags(build.make_variables(kernel))}, cwd=kernel.out)
    out_dir = PACKAGES_DIR / f"{release}_{pkg_version}"
    debs = collect_packages(made, out_dir, release, kernel.out / "package.log")
    print(f"meminit: packaged in {elapsed:.0f}s, in {out_dir}:", file=sys.stderr)
    for deb in debs:
        print(f"  {deb.name}")
    kernel_debs = [f"./{p.name}" for p in debs
                   if p.name.startswith(("linux-image-", "linux-headers-")) and "-dbg_" not in p.name]
    print(f"install as root, then boot {release} once from GRUB's \"Advanced options\" menu (or "
          f"grub-reboot) before making it the default:\n  cd {out_dir} && apt install {' '.join(kernel_debs)}")
    if config.base_config is None:
        print(f"note: the {config.name} config is trimmed for QEMU guests and will not boot most real "
              "machines; for those, --config debian", file=sys.stderr)
    return debs


def collect_packages(made: list[Path], out_dir: Path, release: str, log: Path) -> list[Path]:
    """The packages dpkg-buildpackage made, moved into `out_dir` (emptied first); fails
    without the linux-image package, whatever else was made."""
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    moved = [Path(shutil.move(built, out_dir / built.name)) for built in made if built.exists()]
    debs = [p for p in moved if p.suffix == ".deb"]
    if not any(p.name.startswith(f"linux-image-{release}_") for p in debs):
        raise MeminitError(f"dpkg-buildpackage made no linux-image-{release} package; see {log}")
    return debs


def unpack_image(deb: Path, dest: Path) -> tuple[Path, str]:
    """A linux-image package unpacked into `dest` (dpkg-deb -x): its kernel image and
    release. Booted from there, virtme-ng takes the modules beside it
    (`dest/lib/modules/RELEASE`) and runs depmod over them itself."""
    if not deb.is_file():
        raise MeminitError(f"{deb}: no such package file")
    fields = proc.run(["dpkg-deb", "-f", str(deb), "Package", "Architecture"], f"read {deb.name}").stdout
    control = dict(line.split(": ", 1) for line in fields.splitlines() if ": " in line)
    name = control.get("Package", "(none)")
    if not name.startswith("linux-image-") or name.endswith("-dbg"):
        raise MeminitError(f"{deb.name} is package {name}, not a linux-image package")
    if control.get("Architecture") != "amd64":
        raise MeminitError(f"{deb.name} is for {control.get('Architecture', 'no architecture')}: "
                           "the guests here are x86-64 (amd64)")
    proc.run(["dpkg-deb", "-x", str(deb), str(dest)], f"unpack {deb.name}")
    images = sorted((dest / "boot").glob("vmlinuz-*"))
    if len(images) != 1:
        raise MeminitError(f"{deb.name} holds {len(images)} kernel images in /boot, not one: "
                           f"{', '.join(i.name for i in images) or 'none'}")
    return images[0], images[0].name.removeprefix("vmlinuz-")


def without_libc_dev(control: Path) -> None:
    """debian/control without linux-libc-dev: ours would replace Debian's userspace headers
    (its version sorts higher) and take their updates away."""
    stanzas = control.read_text().split("\n\n")
    control.write_text("\n\n".join(s for s in stanzas if not s.startswith("Package: linux-libc-dev")))
