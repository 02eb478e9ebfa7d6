from pathlib import Path

import pytest

from meminit.core.errors import MeminitError
from meminit.kernel import kconfig


def test_parse_config_reads_values_and_unset_lines():
    text = "CONFIG_A=y\n# CONFIG_B is not set\nCONFIG_C=\"x\"\nCONFIG_D=n\n# comment\n"
    assert kconfig.parse_config(text) == {"CONFIG_A": "y", "CONFIG_B": "n", "CONFIG_C": '"x"', "CONFIG_D": "n"}


def test_dropped_options_names_each_lost_option():
    wanted = {"CONFIG_ZONE_DEVICE": "y", "CONFIG_TEST_HMM": "y", "CONFIG_USB": "n", "CONFIG_NR_CPUS": "8"}
    final = {"CONFIG_ZONE_DEVICE": "y", "CONFIG_NR_CPUS": "64"}
    assert kconfig.dropped_options(wanted, final) == [
        "CONFIG_TEST_HMM=y (olddefconfig left it unset)",
        "CONFIG_NR_CPUS=8 (olddefconfig left 64)",
    ]


def test_fragments_require_the_scenario_options():
    wanted = kconfig.wanted_options(kconfig.fragments_for("series"))
    for option in ("CONFIG_SPARSEMEM_VMEMMAP", "CONFIG_MEMORY_HOTPLUG", "CONFIG_ZONE_DEVICE",
                   "CONFIG_LIBNVDIMM", "CONFIG_BLK_DEV_PMEM", "CONFIG_ND_PFN", "CONFIG_FS_DAX",
                   "CONFIG_DEV_DAX_PMEM", "CONFIG_X86_PMEM_LEGACY",
                   "CONFIG_DEVICE_PRIVATE", "CONFIG_TRANSPARENT_HUGEPAGE",
                   "CONFIG_HUGETLBFS", "CONFIG_DYNAMIC_DEBUG", "CONFIG_KUNIT", "CONFIG_VIRTIO_CONSOLE",
                   "CONFIG_9P_FS", "CONFIG_OVERLAY_FS"):
        assert wanted.get(option) == "y", option
    assert wanted["CONFIG_TEST_HMM"] == "m"  # the device-private scenario loads and unloads it


def test_check_configs_targets_have_kunitconfigs_that_enable_their_suites():
    from meminit.guest import configs

    options = {"memcpy_nontemporal": "CONFIG_MEMCPY_NONTEMPORAL_KUNIT_TEST",
               "zone_device_memmap": "CONFIG_ZONE_DEVICE_MEMMAP_KUNIT_TEST",
               "clear_pages": "CONFIG_FOLIO_ZERO_USER_KUNIT_TEST",
               "folio_zero_user": "CONFIG_FOLIO_ZERO_USER_KUNIT_TEST"}
    every = [t for targets in configs.TARGETS_BY_KERNEL.values() for t in targets.values()]
    assert {t.linux.version for t in every} == {"6.12", "7.3"}
    for target in every:
        wanted = kconfig.parse_config(target.kunitconfig.read_text())
        assert wanted["CONFIG_KUNIT"] == "y"
        for suite in target.suites:
            assert wanted[options[suite]] == "y", (target.name, suite)
        cmd = configs.kunit_command(target, Path("/src"), 2)
        assert f"--arch={target.arch}" in cmd
        assert any(a.startswith("--make_options=CC=ccache") for a in cmd)


def test_check_configs_reports_missing_suites_and_failures():
    from meminit.guest import configs, ktap

    report = ktap.KunitReport(ok=False, summary="", cases=[
        ktap.KunitCase("memcpy_nontemporal", "short", "PASS"),
        ktap.KunitCase("zone_device_memmap", "zdm_fast_equals_slow", "FAIL")])
    problems = configs.check(configs.TARGETS["arm64"], report)
    assert "arm64: suite clear_pages did not run" in problems
    assert "arm64: zone_device_memmap.zdm_fast_equals_slow FAIL" in problems


def test_a_7_3_target_that_exists_for_the_pointer_encoding_must_have_run_with_it():
    from meminit.core import kernels
    from meminit.guest import configs, ktap
    from meminit.kernel import compile_checks

    target = configs.MAINLINE_TARGETS["x86_64"]
    assert target.kunitconfig == kconfig.paths.CONFIG_DIR / "7.3/kunit/x86_64.kunitconfig"
    assert target.build_dir == kernels.MAINLINE.build_root / "kunit-x86_64"
    # um has no 7.3 kunitconfig of its own: the shared one
    assert configs.MAINLINE_TARGETS["um"].kunitconfig == configs.KUNIT_CONFIG_DIR / "um.kunitconfig"
    report = ktap.KunitReport(ok=True, summary="", cases=[
        ktap.KunitCase("memcpy_nontemporal", "short", "PASS"),
        ktap.KunitCase("zone_device_memmap", "zdm_fast_equals_slow", "PASS")])
    mask = "    # zdm_fast_equals_slow: compound tails hold a mask\n"
    assert configs.check(target, report, mask) == [
        "x86_64: the suites never said 'compound tails hold a head pointer'"]
    assert configs.check(target, report, mask.replace("a mask", "a head pointer")) == []
    compile_targets = list(compile_checks.MAINLINE_COMPILE_TARGETS)
    assert compile_targets  # 7.3 has its own since 92d7a00
    assert configs.expand_targets(["all"], kernels.MAINLINE) == ["um", "arm64", "i386", "x86_64", "x86_64-modules",
                                                                    *compile_targets]
    assert configs.expand_targets(["compile"], kernels.MAINLINE) == compile_targets


def test_each_kernel_lays_its_own_fragment_over_the_shared_one():
    from meminit.core import kernels

    lts = kconfig.wanted_options(kconfig.fragments_for("debug", kernels.LTS))
    mainline = kconfig.wanted_options(kconfig.fragments_for("debug", kernels.MAINLINE))
    # 6.12's voluntary default, then the debug kernel's full preemption over it
    assert lts["CONFIG_PROC_SYSCTL"] == "y" and lts["CONFIG_PREEMPT_VOLUNTARY"] == "n"
    assert "CONFIG_PROC_SYSCTL" not in mainline
    # both test the clearing code (6.12 its own patches, 7.3 upstream's); the unit override
    # is 6.12's only
    assert lts["CONFIG_FOLIO_ZERO_USER_KUNIT_TEST"] == mainline["CONFIG_FOLIO_ZERO_USER_KUNIT_TEST"] == "y"
    assert lts["CONFIG_FOLIO_ZERO_USER_UNIT_DEBUGFS"] == "y"
    assert "CONFIG_FOLIO_ZERO_USER_UNIT_DEBUGFS" not in mainline
    names = [str(f.relative_to(kconfig.paths.CONFIG_DIR)) for f in kconfig.fragments_for("series", kernels.LTS)]
    assert names == ["meminit.config", "6.12/meminit.config", "series.config", "6.12/series.config"]


def _fake_make(calls: list[str], keep_option: bool):
    """A make that writes .config as tinyconfig + merge would (with CONFIG_A=y) and an
    olddefconfig that drops CONFIG_A unless keep_option (the tree has it)."""
    def run(cmd, cwd=None):
        out = Path(next(a[2:] for a in cmd if a.startswith("O="))) if "make" in cmd[0] else Path(cmd[3])
        config = out / ".config"
        step = cmd[-1] if "make" in cmd[0] else "merge"
        calls.append(step)
        if step == "tinyconfig":
            config.write_text("CONFIG_B=y\n")
        elif step == "merge":
            config.write_text(config.read_text() + "CONFIG_A=y\n")
        elif step == "olddefconfig" and not keep_option:
            config.write_text(config.read_text().replace("CONFIG_A=y\n", ""))
    return run


def test_configure_starts_again_from_the_fragments_when_a_stale_config_lost_options(tmp_path, monkeypatch):
    fragment = tmp_path / "frag.config"
    fragment.write_text("CONFIG_A=y\n")
    out = tmp_path / "build"
    calls: list[str] = []
    monkeypatch.setattr(kconfig, "_run", _fake_make(calls, keep_option=True))
    kconfig.configure(tmp_path, out, [fragment])
    assert calls == ["tinyconfig", "merge", "olddefconfig"]
    # a make at an older commit dropped CONFIG_A from the .config; the fragments did not change
    (out / ".config").write_text("CONFIG_B=y\n")
    calls.clear()
    kconfig.configure(tmp_path, out, [fragment])
    assert calls == ["olddefconfig", "tinyconfig", "merge", "olddefconfig"]
    assert "CONFIG_A=y" in (out / ".config").read_text()
    # a tree that really lacks the option fails, once configured from scratch too
    calls.clear()
    monkeypatch.setattr(kconfig, "_run", _fake_make(calls, keep_option=False))
    with pytest.raises(MeminitError, match="CONFIG_A=y"):
        kconfig.configure(tmp_path, out, [fragment])
    assert calls == ["olddefconfig", "tinyconfig", "merge", "olddefconfig"]
    calls.clear()
    with pytest.raises(MeminitError, match="CONFIG_A=y"):
        kconfig.configure(tmp_path, out, [fragment])
    assert calls == ["tinyconfig", "merge", "olddefconfig"]  # the stamp went with the failure
