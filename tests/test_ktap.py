"""KTAP parsing goes through the kernel's own kunit.py (needs the unpacked tree)."""

import pytest

from meminit.guest import ktap

LOG = """\
[    0.500000] Linux version 6.12.117-meminit-series
[    1.000000] KTAP version 1
[    1.000001] 1..2
[    1.000002]     KTAP version 1
[    1.000003]     # Subtest: alpha
[    1.000004]     # module: alpha
[    1.000005]     1..2
[    1.000006]     ok 1 alpha_first
[    1.000007]     ok 2 alpha_second # SKIP not here
[    1.000008] # alpha: pass:1 fail:0 skip:1 total:2
[    1.000009] ok 1 alpha
[    1.000010]     KTAP version 1
[    1.000011]     # Subtest: beta
[    1.000012]     # module: beta
[    1.000013]     1..1
[    1.000014]     # beta_broken: EXPECTATION FAILED at mm/x.c:1
[    1.000015]     not ok 1 beta_broken
[    1.000016] # beta: pass:0 fail:1 skip:0 total:1
[    1.000017] not ok 2 beta
[    2.000000] reboot: Power down
"""


def test_kunit_parse_reports_cases_and_failures(kernel_trees):
    result = ktap.parse(LOG, kernel_trees.series)
    assert not result.ok
    assert result.suites() == {"alpha", "beta"}
    assert [(c.suite, c.name) for c in result.failed()] == [("beta", "beta_broken")]
    assert {c.name: c.status for c in result.cases}["alpha_second"] == "SKIP"


def test_kunit_parse_all_passing(kernel_trees):
    passing = "\n".join(line for line in LOG.splitlines() if "beta" not in line).replace("1..2", "1..1", 1)
    result = ktap.parse(passing, kernel_trees.series)
    assert result.ok and result.suites() == {"alpha"}


MODULE_LOG = """\
[   30.000000] KTAP version 1
[   30.000001] 1..1
[   30.000002]     KTAP version 1
[   30.000003]     # Subtest: gamma
[   30.000004]     # module: gamma_kunit
[   30.000005]     1..1
[   30.000006]     not ok 1 gamma_only
[   30.000007] not ok 1 gamma
"""


def test_kunit_parse_reads_the_document_of_each_module_loaded_after_boot(kernel_trees):
    # kunit.py parse alone reads the boot's document and drops the module's
    log = LOG.replace("[    2.000000] reboot: Power down\n", MODULE_LOG + "[   40.000000] reboot: Power down\n")
    assert [d.count("KTAP version") for d in ktap.documents(log)] == [3, 2]
    result = ktap.parse(log, kernel_trees.series)
    assert result.suites() == {"alpha", "beta", "gamma"}
    assert ("gamma", "gamma_only") in [(c.suite, c.name) for c in result.failed()]
    assert ktap.documents(LOG) == [LOG]


PARAM_LOG = """\
[    1.000000] KTAP version 1
[    1.000001] 1..1
[    1.000002]     KTAP version 1
[    1.000003]     # Subtest: delta
[    1.000004]     1..2
[    1.000005]         KTAP version 1
[    1.000006]         # Subtest: delta_params
[    1.000007]         ok 1 first
[    1.000008]         {second} 2 second{skip}
[    1.000009]     {overall} 1 delta_params
[    1.000010]     ok 2 delta_plain
[    1.000011] {overall} 1 delta
"""


@pytest.mark.parametrize("second, skip, overall, status", [
    ("ok", "", "ok", "PASS"), ("not ok", "", "not ok", "FAIL"), ("ok", " # SKIP no device", "ok", "SKIP")])
def test_a_parameterised_case_counts_as_a_case_of_its_suite(kernel_trees, second, skip, overall, status):
    # kunit.py's JSON lists the parameters as a group of their own, with no status
    log = PARAM_LOG.format(second=second, skip=skip, overall=overall)
    cases = {(c.suite, c.name): c.status for c in ktap.parse(log, kernel_trees.series).cases}
    assert cases[("delta", "delta_params")] == status
    assert cases[("delta_params", "first")] == "PASS" and cases[("delta", "delta_plain")] == "PASS"


def case(suite: str, name: str, status: str) -> ktap.KunitCase:
    return ktap.KunitCase(suite=suite, name=name, status=status)


def test_the_gate_passes_a_complete_run_and_names_each_way_to_fail():
    cases = [case("alpha", "a1", "PASS"), case("alpha", "a2", "SKIP"), case("beta", "b1", "PASS")]
    report = ktap.KunitReport(ok=True, cases=cases, summary="")
    assert ktap.gate(report, ["alpha", "beta"]) == []
    assert ktap.gate(report, ["alpha", "beta", "gamma"]) == ["suite gamma did not run"]
    assert ktap.gate(report, ["alpha"], skips_allowed=False) == ["alpha.a2 SKIP"]
    assert ktap.gate(report, ["beta"], skips_allowed=False) == []   # alpha's skip is not ours
    assert ktap.gate(report, ["alpha"], must_pass=["a2"]) == ["a2 SKIP, and this target exists to run it"]
    failed = ktap.KunitReport(ok=False, cases=[*cases, case("beta", "b2", "FAIL")], summary="")
    assert ktap.gate(failed, ["beta"]) == ["beta.b2 FAIL"]
    crashed = ktap.KunitReport(ok=False, cases=cases, summary="")
    assert ktap.gate(crashed, ["alpha"]) == ["kunit.py parse found the run broken (a crash or a truncated log)"]
