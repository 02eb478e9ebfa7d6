"""`meminit package`, offline: its version, its changelog, the config it is asked for and
what stops it before it builds. tests/test_package_guest.py builds, installs and boots one."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from meminit.core import deps, kernels, proc
from meminit.kernel import build, compile_checks, kconfig, package, source
from meminit.core.errors import MeminitError

from conftest import made_deb

TREES = source.Trees(base=Path("/nonexistent/base"), series=Path("/nonexistent/series"))


def test_the_version_is_debian_s_then_the_commit_s_time_and_the_commit():
    version = package.package_version("6.12.117-1~deb12u1", "83c676362249abcdef", 1795957200)
    assert version == "6.12.117-1~deb12u1+meminit.20261129130000.83c676362249"
    later = package.package_version("6.12.117-1~deb12u1", "0a1b2c3d4e5f", 1795957201)
    for lower, higher in (("6.12.117-1~deb12u1", version), (version, later)):
        assert proc.run(["dpkg", "--compare-versions", lower, "lt", higher], check=False).returncode == 0


def test_the_changelog_names_the_source_the_commit_the_config_and_every_patch():
    text = package.changelog_entry("linux-meminit (V) bookworm; urgency=low",
                                   " -- meminit developers <meminit@localhost>  Tue, 24 Nov 2026 10:14:05 +0000",
                                   "6.12.117-1~deb12u1", "83c676362249abcdef", "debian", ["mm: one", "mm: two"])
    assert text.splitlines() == [
        "linux-meminit (V) bookworm; urgency=low", "",
        "  * linux-source-6.12 6.12.117-1~deb12u1 with the meminit series,",
        "    commit 83c676362249, config debian:",
        "    - mm: one", "    - mm: two", "",
        " -- meminit developers <meminit@localhost>  Tue, 24 Nov 2026 10:14:05 +0000"]


def test_a_base_line_package_says_it_has_no_series():
    assert package.package_version("6.12.117-1~deb12u1", "68c629b264fe99", 1731801600, with_series=False) == \
        "6.12.117-1~deb12u1+meminit.base.20241117000000.68c629b264fe"
    text = package.changelog_entry("l", " -- m", "6.12.117-1~deb12u1", "68c629b264fe99", "debian", None)
    assert "without the meminit series" in text and "    - " not in text


def test_configs_map_to_kernels_and_build_dirs(tmp_path):
    assert package.config_for("meminit", TREES).kernel.variant == "series"
    assert package.config_for("debug", TREES).kernel.variant == "debug"
    debian = package.config_for("debian", TREES)
    assert debian.base_config == Path("/usr/src/linux-config-6.12/config.amd64_none_amd64.xz")
    assert debian.base_config == compile_checks.debian_config_path(kernels.LTS)
    assert debian.kernel.localversion == "-meminit-debian"
    mine = tmp_path / "Big Box.config"
    mine.write_text("CONFIG_64BIT=y\nCONFIG_X86_64=y\n")
    custom = package.config_for(str(mine), TREES)
    assert (custom.name, custom.kernel.out.name, custom.kernel.src) == ("big-box", "package-big-box", TREES.series)
    # a file named like a built-in config gets its own name, so it never takes their packages
    (tmp_path / "debug.config").write_text("CONFIG_X86_64=y\n")
    assert package.config_for(str(tmp_path / "debug.config"), TREES).kernel.localversion == "-meminit-file-debug"
    (tmp_path / "arm64.config").write_text("CONFIG_ARM64=y\n")
    with pytest.raises(MeminitError, match="not an x86-64 config"):
        package.config_for(str(tmp_path / "arm64.config"), TREES)
    with pytest.raises(MeminitError, match="meminit, debug, debian or a config file"):
        package.config_for(str(tmp_path / "missing.config"), TREES)
    # --base: the pristine tree, its own build dir and release
    base = package.config_for("debian", TREES, with_series=False)
    assert (base.kernel.src, base.kernel.out.name, base.kernel.localversion) == (
        TREES.base, "package-debian-base", "-meminit-debian-base")
    assert package.config_for("meminit", TREES, with_series=False).kernel.variant == "base"
    with pytest.raises(MeminitError, match="debug config needs the series"):
        package.config_for("debug", TREES, with_series=False)


def unbuilt(choice: str, out: Path) -> package.PackageConfig:
    """The config, its build tree `out` (not the checkout's, which may hold a built kernel)."""
    config = package.config_for(choice, TREES)
    kernel = build.Kernel(config.kernel.variant, TREES.series, out)
    return package.PackageConfig(config.name, kernel, config.base_config)


def test_a_build_without_room_is_refused_before_it_starts(monkeypatch, tmp_path):
    monkeypatch.setattr(deps, "ensure", lambda packages: None)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(100 << 30, 99 << 30, 1 << 30))
    with pytest.raises(MeminitError, match="needs about 2G free .* there are 1G"):
        package.preflight(unbuilt("meminit", tmp_path))
    with pytest.raises(MeminitError, match="debian package build needs about 30G"):
        package.preflight(unbuilt("debian", tmp_path))


def test_the_debian_config_is_asked_for_with_the_build_tools_and_dpkg_dev(monkeypatch):
    asked: list[dict] = []
    monkeypatch.setattr(deps, "ensure", asked.append)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(100 << 30, 0, 100 << 30))
    package.preflight(package.config_for("debian", TREES))
    (needed,) = asked
    assert {"linux-config-6.12", "dpkg-dev", "debhelper", "linux-source-6.12"} <= set(needed)


def test_make_s_variables_reach_debian_rules_escaped():
    assert package.makeflags(["LOCALVERSION=-meminit-series", "CC=ccache gcc"]) == \
        "LOCALVERSION=-meminit-series CC=ccache\\ gcc"


def test_packaging_builds_with_the_variables_build_used():
    # else debian/rules' make would rebuild every object with another CC, or another release
    kernel = package.config_for("meminit", TREES).kernel
    assert build.make_variables(kernel) == ["CC=ccache gcc", "LOCALVERSION=-meminit-series"]
    assert set(build.make_variables(kernel)) <= set(build.make_command(kernel, 2, ["bzImage"]))


def test_linux_libc_dev_is_not_built(tmp_path):
    control = tmp_path / "control"
    control.write_text("Source: linux-meminit-series\n\nPackage: linux-image-6.12.117-meminit-series\n"
                       "Architecture: amd64\n\nPackage: linux-libc-dev\nSection: devel\n\n"
                       "Package: linux-headers-6.12.117-meminit-series\n")
    package.without_libc_dev(control)
    assert "linux-libc-dev" not in control.read_text()
    assert control.read_text().count("Package: ") == 2


def test_packages_from_a_file_carry_the_series_without_its_kunit_suites():
    options = package.series_options()
    assert "CONFIG_ZONE_DEVICE_MEMMAP_HASH=y" in options and "KUNIT" not in options


def test_a_built_tree_needs_room_only_for_packaging(tmp_path, monkeypatch):
    monkeypatch.setattr(deps, "ensure", lambda packages: None)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(100 << 30, 90 << 30, 10 << 30))
    config = unbuilt("debian", tmp_path)
    with pytest.raises(MeminitError, match="needs about 30G"):
        package.preflight(config)
    (tmp_path / "vmlinux").write_text("")
    package.preflight(config)


def test_a_config_that_drops_an_option_measure_needs_is_refused(tmp_path, monkeypatch):
    # what olddefconfig keeps decides: DEVICE_PRIVATE needs ZONE_DEVICE, which the file may lack
    def reconfigure(src: Path, out: Path, text: str) -> None:
        (out / ".config").write_text("".join(line + "\n" for line in text.splitlines()
                                            if not line.startswith("CONFIG_DEVICE_PRIVATE=")))
    monkeypatch.setattr(kconfig, "reconfigure", reconfigure)
    mine = tmp_path / "box.config"
    mine.write_text("CONFIG_X86_64=y\n")
    config = unbuilt(str(mine), tmp_path / "out")
    with pytest.raises(MeminitError, match="cannot carry the options of package.config and the series: "
                                           "CONFIG_DEVICE_PRIVATE"):
        package.configure_from_file(config)
    monkeypatch.setattr(kconfig, "reconfigure", lambda src, out, text: (out / ".config").write_text(text))
    package.configure_from_file(config)


def test_packages_are_collected_and_a_run_without_the_image_fails(tmp_path):
    release = "6.12.117-meminit-series"
    made = [tmp_path / f"linux-headers-{release}_1_amd64.deb", tmp_path / f"linux-image-{release}_1_amd64.deb",
            tmp_path / f"linux-image-{release}-dbg_1_amd64.deb", tmp_path / "linux-meminit-series_1_amd64.changes"]
    out = tmp_path / "packages"
    (out / "stale").mkdir(parents=True)
    made[0].write_text("h")
    with pytest.raises(MeminitError, match=f"made no linux-image-{release} package; see log"):
        package.collect_packages(made, out, release, Path("log"))
    for built in made:
        built.write_text("x")
    debs = package.collect_packages(made, out, release, Path("log"))
    assert sorted(p.name for p in debs) == sorted(p.name for p in made if p.suffix == ".deb")
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in made)


def test_a_linux_image_package_unpacks_to_its_kernel_and_modules(tmp_path):
    deb = made_deb(tmp_path, "linux-image-6.12.117-x", [
        "boot/vmlinuz-6.12.117-x", "boot/config-6.12.117-x", "lib/modules/6.12.117-x/kernel/a.ko.xz"])
    image, release = package.unpack_image(deb, tmp_path / "image")
    assert (image, release) == (tmp_path / "image/boot/vmlinuz-6.12.117-x", "6.12.117-x")
    # where virtme-ng looks for the modules of an image it boots: beside it
    assert (tmp_path / "image/lib/modules/6.12.117-x/kernel/a.ko.xz").exists()


@pytest.mark.parametrize("name, files, refusal", [
    ("linux-headers-6.12.117-x", ["usr/src/linux-headers-6.12.117-x/Makefile"], "not a linux-image package"),
    ("linux-image-6.12.117-x-dbg", ["usr/lib/debug/boot/vmlinux-6.12.117-x"], "not a linux-image package"),
    ("linux-image-6.12.117-x", ["boot/config-6.12.117-x"], "holds 0 kernel images in /boot, not one: none"),
    ("linux-image-6.12.117-x", ["boot/vmlinuz-6.12.117-x", "boot/vmlinuz-6.12.117-y"],
     "holds 2 kernel images"),
])
def test_only_a_package_with_one_kernel_image_is_booted(tmp_path, name, files, refusal):
    with pytest.raises(MeminitError, match=refusal):
        package.unpack_image(made_deb(tmp_path, name, files), tmp_path / "image")


def test_a_package_for_another_architecture_is_not_booted(tmp_path):
    deb = made_deb(tmp_path, "linux-image-6.12.117-x", ["boot/vmlinuz-6.12.117-x"], arch="arm64")
    with pytest.raises(MeminitError, match="is for arm64: the guests here are x86-64"):
        package.unpack_image(deb, tmp_path / "image")


def test_a_package_file_that_is_not_there_is_named(tmp_path):
    with pytest.raises(MeminitError, match="nowhere.deb: no such package file"):
        package.unpack_image(tmp_path / "nowhere.deb", tmp_path / "image")
