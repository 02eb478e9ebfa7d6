"""check-configs x86_64-modules: the core's suites as modules of a KUNIT=m kernel."""

from __future__ import annotations

from meminit.core import kernels
from meminit.guest import kunit_modules, ktap
from meminit.kernel import kconfig


def _report(*cases: tuple[str, str, str]) -> ktap.KunitReport:
    return ktap.KunitReport(ok=all(c[2] in ("PASS", "SKIP") for c in cases), summary="",
                            cases=[ktap.KunitCase(*c) for c in cases])


PASSED = _report(("memcpy_nontemporal", "short", "PASS"), ("zone_device_memmap", "zdm_fast_equals_slow", "PASS"))
ALL_BUILT = {"kunit": True, "memcpy_nontemporal": True, "zone_device_memmap": True}


def test_the_fragment_makes_kunit_and_the_core_suites_modules_and_drops_the_bool_suite():
    """On both kernels the debug kernel's options, with KUnit and the core's suites as
    modules over the series fragment's =y, and the clearing topic's bool suite off."""
    for linux in (kernels.LTS, kernels.MAINLINE):
        wanted = kconfig.wanted_options(kconfig.fragments_for(kunit_modules.VARIANT, linux))
        assert wanted["CONFIG_KUNIT"] == "m"
        assert wanted["CONFIG_ZONE_DEVICE_MEMMAP_KUNIT_TEST"] == wanted["CONFIG_MEMCPY_NONTEMPORAL_KUNIT_TEST"] == "m"
        assert wanted["CONFIG_FOLIO_ZERO_USER_KUNIT_TEST"] == "n"
        assert wanted["CONFIG_DEBUG_VM"] == "y"  # the debug kernel under it
        assert all(v != "y" for k, v in wanted.items() if k.endswith("KUNIT_TEST"))


def test_modules_built_reads_modules_order(tmp_path):
    (tmp_path / "modules.order").write_text("lib/kunit/kunit.o\nmm/tests/zone_device_memmap_kunit.o\nlib/test_hmm.o\n")
    assert kunit_modules.modules_built(tmp_path) == {
        "kunit": True, "memcpy_nontemporal": False, "zone_device_memmap": True}
    assert not any(kunit_modules.modules_built(tmp_path / "none").values())


def test_check_passes_only_kunit_m_with_each_suite_a_module_that_passed_every_case():
    assert kunit_modules.check(PASSED, ALL_BUILT) == []
    # KUNIT=y: no kunit.ko
    assert kunit_modules.check(PASSED, {**ALL_BUILT, "kunit": False}) == ["kunit: no module in modules.order"]
    assert kunit_modules.check(PASSED, {**ALL_BUILT, "zone_device_memmap": False}) == [
        "zone_device_memmap: no module in modules.order"]
    # a module that did not load: its suite did not run
    assert kunit_modules.check(_report(("memcpy_nontemporal", "short", "PASS")), ALL_BUILT) == [
        "suite zone_device_memmap did not run"]
    # a skipped case means a fast path went untested
    skipped = _report(("memcpy_nontemporal", "short", "PASS"), ("zone_device_memmap", "zdm_default_mode", "SKIP"))
    assert kunit_modules.check(skipped, ALL_BUILT) == ["zone_device_memmap.zdm_default_mode SKIP"]


def test_a_report_tallies_its_cases_and_names_the_skipped():
    skipped = _report(("memcpy_nontemporal", "short", "PASS"), ("zone_device_memmap", "zdm_default_mode", "SKIP"),
                      ("zone_device_memmap", "zdm_fast_equals_slow", "FAIL"))
    assert skipped.tally() == "1 passed, 1 failed, 1 skipped (zone_device_memmap.zdm_default_mode)"
    assert PASSED.tally() == "2 passed, 0 failed, 0 skipped"
