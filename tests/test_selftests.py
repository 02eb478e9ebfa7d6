"""The mm selftests' results: exit codes, KTAP cases (through kunit.py) and skip reasons."""

from pathlib import Path

import pytest

from meminit.guest import selftest_results as results
from meminit.guest import selftests
from meminit.core import kernels
from meminit.core.errors import MeminitError

# kselftest.h's output, as cow prints it: a plan, results, a skip with its reason
COW_LIKE = """\
TAP version 13
# [INFO] detected THP size: 2048 KiB
1..4
# [RUN] Basic COW after fork() ... with base page
ok 1 No leak from parent into child
# [RUN] Basic COW after fork() ... with THP
ok 2 No leak from parent into child
# [RUN] Basic COW after fork() ... with hugetlb (1048576 kB)
ok 3 # SKIP need more free huge pages
# [RUN] vmsplice() + unmap in child ... with hugetlb (2048 kB)
ok 4 # XFAIL Leak from parent into child
# Totals: pass:2 fail:0 xfail:1 xpass:0 skip:1 error:0
"""


def write_run(tmp_path: Path, test: selftests.Selftest, output: str, code: int) -> Path:
    (tmp_path / f"{test.slug}.log").write_text(output)
    (tmp_path / f"{test.slug}.exit").write_text(f"{code} 100.0 112.5\n")
    return tmp_path


COW = selftests.Selftest(("cow",))


def test_a_passing_ktap_program_counts_its_cases(tmp_path, kernel_trees):
    outcome = selftests.collect(COW, write_run(tmp_path, COW, COW_LIKE, 0), kernel_trees.base)
    assert outcome.status == "PASS" and outcome.seconds == 12.5
    assert (outcome.count("PASS"), outcome.count("SKIP")) == (2, 1)
    assert outcome.skip_reasons == {"need more free huge pages": 1}
    assert outcome.cases["4 (unnamed)"] == "XFAIL"
    assert outcome.cell == "PASS 2/0/1 +1 xfail (12s)"


def test_a_failed_case_fails_the_program_even_if_it_exits_0(tmp_path, kernel_trees):
    broken = COW_LIKE.replace("ok 2 No leak", "not ok 2 No leak")
    outcome = selftests.collect(COW, write_run(tmp_path, COW, broken, 0), kernel_trees.base)
    assert outcome.status == "FAIL"
    # cases are numbered: cow names many of them alike
    assert outcome.cases == {"1 No leak from parent into child": "PASS",
                             "2 No leak from parent into child": "FAIL", "3 (unnamed)": "SKIP",
                             "4 (unnamed)": "XFAIL"}


def test_a_program_without_ktap_is_judged_by_its_exit_code(tmp_path, kernel_trees):
    test = selftests.Selftest(("khugepaged",))
    skipped = selftests.collect(test, write_run(tmp_path, test, "Transparent Hugepages not available\n",
                                                results.KSFT_SKIP), kernel_trees.base)
    assert skipped.status == "SKIP" and not skipped.cases
    assert skipped.skip_reasons == {"Transparent Hugepages not available": 1}
    timed_out = selftests.collect(test, write_run(tmp_path, test, "", results.TIMEOUT_EXIT),
                                  kernel_trees.base)
    assert timed_out.status == "TIMEOUT"
    assert selftests.collect(test, write_run(tmp_path, test, "x\n", 1), kernel_trees.base).status == "FAIL"


def test_a_program_the_guest_never_reached_is_not_run(tmp_path, kernel_trees):
    assert selftests.collect(COW, tmp_path, kernel_trees.base).status == "NOT RUN"


def outcome(status: str, **cases: str) -> results.Outcome:
    return results.Outcome("cow", status, 0, 1.0, dict(cases))


def test_losses_name_programs_and_cases_base_passes_and_the_series_does_not():
    assert results.losses([outcome("PASS", a="PASS")], [outcome("PASS", a="PASS")]) == []
    # failing on both is listed in the table, not a loss
    assert results.losses([outcome("FAIL", a="FAIL")], [outcome("FAIL", a="FAIL")]) == []
    assert results.losses([outcome("PASS")], [outcome("FAIL")]) == ["cow: base PASS, series FAIL"]
    lost = results.losses([outcome("FAIL", a="PASS", b="FAIL")], [outcome("FAIL", b="FAIL")])
    assert lost == ["cow: check 'a' passes on base, missing on series"]
    # checks are matched by number: cow names a check after its outcome
    named = results.losses([outcome("PASS", **{"7 No leak": "PASS"})],
                             [outcome("PASS", **{"7 Leak": "FAIL"})])
    assert named == ["cow: check '7 No leak' passes on base, FAIL on series"]
    # what the program marks as an expected failure is not a loss
    assert results.losses([outcome("PASS", **{"7 No leak": "PASS"})],
                            [outcome("PASS", **{"7 (unnamed)": "XFAIL"})]) == []


def test_the_table_shows_both_kernels_and_every_skip_reason():
    base = results.Outcome("cow", "PASS", 0, 3.0, {"a": "PASS", "b": "SKIP"}, results.Counter({"why": 1}))
    series = results.Outcome("cow", "FAIL", 1, 4.0, {"a": "FAIL", "b": "SKIP"})
    table = results.render({"base": [base], "series": [series]})
    assert "PASS 1/0/1 (3s)" in table and "FAIL 0/1/1 (4s)" in table
    assert "skip on base: cow: 1 x why" in table


def test_selection_by_program_or_full_name():
    assert {t.name for t in selftests.select(["khugepaged"])} == {"khugepaged", "khugepaged -s 2"}
    assert [t.name for t in selftests.select(["khugepaged -s 2"])] == ["khugepaged -s 2"]
    with pytest.raises(MeminitError, match="unknown selftest nope"):
        selftests.select(["nope"])


def test_each_kernel_runs_its_own_programs():
    """7.3 renamed hugepage-* to hugetlb-* and prints KTAP from khugepaged and uffd-unit-tests:
    a 6.12 name is unknown there, and no 7.3 program is read in 6.12's own formats."""
    assert [t.name for t in selftests.select(["hugetlb-mmap"], kernels.MAINLINE)] == ["hugetlb-mmap"]
    with pytest.raises(MeminitError, match="unknown selftest map_hugetlb on Linux 7.3"):
        selftests.select(["map_hugetlb"], kernels.MAINLINE)
    assert all(not t.own_format for t in selftests.of(kernels.MAINLINE))
    assert {t.binary for t in selftests.of(kernels.LTS) if t.own_format} == {"khugepaged", "uffd-unit-tests"}
    for linux in kernels.KERNELS.values():
        assert selftests.fast(linux) and set(selftests.fast(linux)) < set(selftests.of(linux))
        assert selftests.SelftestsRequest(linux=linux).chosen == selftests.of(linux)
    with pytest.raises(MeminitError, match="not ported to Linux 9.9"):
        selftests.of(kernels.Linux("9.9", base_date=""))


def test_every_program_of_the_kernel_under_test_is_in_its_tree(kernel_trees):
    """The list of $MEMINIT_LINUX's selftests names programs its pristine tree has."""
    assert selftests.missing_programs(selftests.of(kernel_trees.linux), kernel_trees.base) == []


def test_the_guest_script_bounds_every_program_and_keeps_its_output(tmp_path):
    fast = selftests.fast(kernels.LTS)
    script = selftests.guest_script(fast, Path("/bin"), tmp_path, 128)
    assert "echo 128 > /proc/sys/vm/nr_hugepages" in script
    for test in fast:
        assert f"run {test.slug} {test.timeout_s} 128 /bin/{test.binary}" in script
    # a program that wants its own pool gets it
    lone = selftests.select(["hugetlb_fault_after_madv"])
    assert "run hugetlb_fault_after_madv 600 1 /bin/hugetlb_fault_after_madv" in \
        selftests.guest_script(lone, Path("/bin"), tmp_path, 128)


KHUGEPAGED = """\
Save THP and khugepaged settings... \x1b[32mOK\x1b[0m

Run test: collapse_full (khugepaged:anon)
Collapse multiple fully populated PTE table.... \x1b[32mOK\x1b[0m

Run test: collapse_swapin_single_pte (khugepaged:anon)
Swapout one page... \x1b[31mFail\x1b[0m
Swapout one page... \x1b[33mSkip\x1b[0m
"""


def test_khugepaged_exit_code_counts_failures_so_its_own_lines_decide(tmp_path, kernel_trees):
    test = selftests.Selftest(("khugepaged",), own_format="khugepaged")
    # 4 failed checks exit 4, which is not a skip
    outcome = selftests.collect(test, write_run(tmp_path, test, KHUGEPAGED, 4), kernel_trees.base)
    assert outcome.status == "FAIL"
    assert outcome.cases == {
        "1 Save THP and khugepaged settings": "PASS",
        "2 collapse_full (khugepaged:anon): Collapse multiple fully populated PTE table": "PASS",
        "3 collapse_swapin_single_pte (khugepaged:anon): Swapout one page": "FAIL",
        "4 collapse_swapin_single_pte (khugepaged:anon): Swapout one page": "SKIP"}
    no_thp = selftests.collect(test, write_run(tmp_path, test, results.OWN_FORMATS["khugepaged"].skipped + "\n", 4),
                               kernel_trees.base)
    assert no_thp.status == "SKIP"


UFFD = """\
Testing UFFDIO_API (with syscall)... done
Testing wp-fork-pin on anon... skipped [reason: Possibly CONFIG_GUP_TEST missing or unprivileged]
Testing minor on shmem... failed [reason: stats check error]
Testing events on anon... ERROR: UFFDIO_COPY error: -2 (errno=2, @uffd-common.c:617)
"""


def test_uffd_checks_and_the_error_that_aborts_them_are_cases(tmp_path, kernel_trees):
    test = selftests.Selftest(("uffd-unit-tests",), own_format="uffd")
    outcome = selftests.collect(test, write_run(tmp_path, test, UFFD, 1), kernel_trees.base)
    assert outcome.status == "FAIL"
    assert outcome.cases == {"1 UFFDIO_API (with syscall)": "PASS", "2 wp-fork-pin on anon": "SKIP",
                             "3 minor on shmem": "FAIL", "4 events on anon": "ERROR"}
    assert outcome.skip_reasons == {"Possibly CONFIG_GUP_TEST missing or unprivileged": 1}


def test_a_kernel_run_alone_fails_on_any_failure_as_it_has_nothing_to_compare_with():
    assert results.judge({"base": [outcome("FAIL")], "series": [outcome("FAIL")]}) == []
    assert results.judge({"debug": [outcome("PASS"), outcome("SKIP")]}) == []
    assert results.judge({"debug": [outcome("TIMEOUT")]}) == ["cow: TIMEOUT on debug"]


def test_a_loss_that_does_not_repeat_on_the_recheck_is_flaky_not_lost():
    names = [t.name for t in selftests.select(["uffd-unit-tests", "khugepaged"])]
    first = ["uffd-unit-tests: base PASS, series FAIL", "uffd-unit-tests: check '52 x' passes on base, ERROR on series",
             "khugepaged -s 2: check '3 y' passes on base, FAIL on series"]
    again = ["khugepaged -s 2: check '3 y' passes on base, FAIL on series"]
    assert results.recheck_verdict(first, again, names) == ["uffd-unit-tests"]
    assert results.recheck_verdict(first, first, names) == []
    assert results.flaky_line("uffd-unit-tests", first, names) == (
        "uffd-unit-tests: base PASS, series FAIL and 1 more, in the first run only: the recheck lost nothing")


def test_programs_a_kernel_tree_lacks_are_named_before_any_build(tmp_path):
    # 7.3 renamed hugepage-mmap to hugetlb-mmap and dropped map_hugetlb: a tree without a
    # program's source must be refused naming it, not fail inside make
    mm = tmp_path / selftests.SELFTEST_DIR
    mm.mkdir(parents=True)
    for program in ("hugetlb-mmap", "gup_test"):
        (mm / f"{program}.c").write_text("int main(void) { return 0; }\n")
    tests = selftests.select(["hugepage-mmap", "map_hugetlb", "gup_test"])
    assert selftests.missing_programs(tests, tmp_path) == ["hugepage-mmap", "map_hugetlb"]
    (mm / "hugepage-mmap.c").write_text("")
    (mm / "map_hugetlb.c").write_text("")
    assert selftests.missing_programs(tests, tmp_path) == []
