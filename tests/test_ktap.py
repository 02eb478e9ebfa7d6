"""KTAP parsing goes through the kernel's own kunit.py (needs the unpacked tree)."""

from meminit import ktap

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
