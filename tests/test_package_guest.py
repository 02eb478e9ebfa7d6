"""`meminit package` for real: the debug series kernel packaged, its linux-image installed
with `dpkg -i` in a guest, and the packaged kernel booted.

The guest sees the host's root read-only; /usr, /var, /boot and /etc are overlays kept in
its memory (vng --overlay-rwdir), so dpkg installs into them and the host's package
database is never touched (the package's directories are made before `dpkg -i`: overlayfs
refuses dpkg's rename of a new directory). The packaged kernel is then booted
by `./meminit boot --deb`, which unpacks it on the host (dpkg-deb -x), in a second guest.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from meminit import cli
from meminit.core import deps, kernels, proc, results
from meminit.guest import vm
from meminit.kernel import build, compile_checks, kconfig, package, parts, source

pytestmark = pytest.mark.kernel

# where dpkg -i writes: its database and the package's files
OVERLAYS = ["/usr", "/var", "/boot", "/etc"]


@dataclass
class Packaged:
    debs: list[Path]
    release: str
    version: str
    run_dir: Path
    accel: str

    def deb(self, prefix: str) -> Path:
        (found,) = [d for d in self.debs if d.name.startswith(f"{prefix}{self.release}_")]
        return found


@pytest.fixture(scope="module")
def packaged(lts_kernel_trees) -> Packaged:
    debs = package.package("debug")
    kernel = build.kernel_for("debug", lts_kernel_trees)
    run_dir = results.new_run_dir("test-package")
    accel = vm.resolve_accel("auto", kernel.image, run_dir, kernel.variant)
    version = package.version_of(lts_kernel_trees.series)
    return Packaged(debs, kernel.release, version, run_dir, accel)


def boot(image: Path, packaged: Packaged, name: str, script: str, overlays: list[str]) -> vm.BootResult:
    spec = vm.BootSpec(image=image, kernel=name, name=name, script=script, memory_bytes=2 << 30,
                       cpus=2, append=[vm.SKIP_KUNIT], timeout_s=900, overlay_dirs=overlays)
    result = vm.boot(spec, packaged.run_dir, packaged.accel)
    assert result.exit_code == 0, f"{name}: guest exit {result.exit_code}: {result.stderr_tail()}"
    return result


def test_the_packages_carry_the_series_and_list_its_patches(packaged):
    unpacked = packaged.run_dir / "image"
    package.unpack_image(packaged.deb("linux-image-"), unpacked)
    info = proc.run(["dpkg-deb", "-f", str(packaged.deb("linux-image-")), "Version", "Package"]).stdout
    assert f"Version: {packaged.version}" in info and f"linux-image-{packaged.release}" in info
    changelog = unpacked / "usr/share/doc" / f"linux-image-{packaged.release}" / "changelog.Debian.gz"
    text = proc.run(["zcat", str(changelog)]).stdout
    subjects = source.git(source.prepare_trees().series, "log", "--format=%s",
                          f"{source.BASE_TAG}..HEAD").splitlines()
    # the default stack: every part but the RFCs
    assert len(subjects) == len(parts.stack_patches(kernels.LTS.patches)) and all(f"    - {s}\n" in text for s in subjects)
    assert packaged.deb("linux-headers-")


def test_the_image_package_installs_with_dpkg_in_a_guest(packaged):
    out = packaged.run_dir
    deb = shlex.quote(str(packaged.deb('linux-image-')))
    # overlayfs without redirect_dir refuses dpkg's rename of a new directory into place
    # (EXDEV): the package's directories are made first, its files still installed by dpkg
    # virtme-ng links /lib/modules/<release> of the running kernel to the build's modules
    # (read-only); the guest runs the kernel it installs, the same release: the link goes
    script = (f"ls -ld /lib/modules/{packaged.release} > {out}/modules-before.txt; "
              f"[ -L /lib/modules/{packaged.release} ] && rm /lib/modules/{packaged.release}; "
              f"dpkg-deb -c {deb} | awk '$1 ~ /^d/ {{print $6}}' | (cd / && xargs mkdir -p); "
              f"dpkg -i {deb} > {out}/install.out 2>&1; "
              f"echo $? > {out}/install.rc; "
              f"dpkg-query -W -f='${{Version}}' linux-image-{packaged.release} > {out}/installed.txt; "
              f"ls /boot /lib/modules > {out}/installed-files.txt")
    kernel = build.kernel_for("debug", source.prepare_trees())
    boot(kernel.image, packaged, "install", script, OVERLAYS)
    # the test's premise: virtme-ng had linked the running kernel's modules there
    assert "->" in (out / "modules-before.txt").read_text()
    assert (out / "install.rc").read_text().strip() == "0", (out / "install.out").read_text()
    assert (out / "installed.txt").read_text() == packaged.version
    files = (out / "installed-files.txt").read_text().split()
    assert f"vmlinuz-{packaged.release}" in files and packaged.release in files


def test_the_packaged_kernel_boots(packaged, capsys):
    """`./meminit boot --deb` as the README runs it on the debian package, on the debug one."""
    code = cli.main(["boot", "--deb", str(packaged.deb("linux-image-")), "--pmem-size", "1G",
                     "--accel", packaged.accel, "--append", vm.SKIP_KUNIT,
                     "-c", "uname -r; cat /proc/version; cat /sys/bus/nd/devices/namespace0.0/size"])
    out = capsys.readouterr().out
    assert code == 0, out
    release, version, pmem_size = out.splitlines()[:3]
    assert release == packaged.release
    revision = packaged.version.rsplit("-", 1)[1]
    assert f"#{revision} " in version
    assert pmem_size == str(1 << 30)


@pytest.mark.parametrize("with_series", [True, False], ids=["series", "base"])
def test_debian_s_config_takes_what_measure_needs(lts_kernel_trees, with_series, tmp_path):
    """`package --config debian [--base]` as far as its config: configure_from_file fails
    naming any option of config/package.config or the series that olddefconfig drops."""
    deps.ensure({"linux-config-6.12": str(compile_checks.debian_config_path(kernels.LTS))})
    config = package.config_for("debian", lts_kernel_trees, with_series)
    config = replace(config, kernel=replace(config.kernel, out=tmp_path / "out"))
    package.configure_from_file(config)
    final = kconfig.parse_config((tmp_path / "out" / ".config").read_text())
    assert final.get("CONFIG_DEVICE_PRIVATE") == "y" and final.get("CONFIG_TEST_HMM") == "m"
    assert final.get("CONFIG_DEBUG_INFO_NONE") == "y" and final.get("CONFIG_MODULE_SIG_ALL") == "y"
    assert (final.get("CONFIG_ZONE_DEVICE_MEMMAP_HASH") == "y") == with_series
    assert not [k for k, v in final.items() if k.endswith("_KUNIT_TEST") and v == "y"]
