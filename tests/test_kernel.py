"""Builds the debug series kernel, boots it under QEMU, and checks what the boots show.

The kernel is the series with config/debug.config (DEBUG_VM, lockdep, full preemption,
NUMA, the page_ref tracepoint), so a KUnit case or a rebind that upsets any of those
checks fails here.

One boot serves nearly every check: the running kernel is ours, the log has no oops/WARN,
every KUnit suite of config/kunit-suites.txt ran and passed (parsed by kunit.py), and
an fsdax map=dev namespace rebinds with timed, identical memmap initialisation in every
mode, large enough (above the threads RFC's 1 GiB threshold) to be initialised by two threads
where the kernel carries that part (`meminit test --rfc threads,auto`; $MEMINIT_RFC), on one
otherwise. The guest has two NUMA nodes, and the pmem sits on the one without CPUs
(vm.numa_pmem_layout), so the threaded init takes its helpers from another node.
With --long, a second boot of the same kernel with preempt=none (6.12; 7.3 has no none
model on x86, so preempt=lazy there) runs the KUnit suites and a rebind once more (CI's
arm64 KUnit target of 6.12 runs the suites under PREEMPT_NONE), a third a short soak
(soak.py) of every scenario, and a fourth the fast subset of the kernel's own mm
selftests (selftests.py). The kernel is 6.12's unless `meminit test --linux 7.3` names
7.3 ($MEMINIT_LINUX).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import long_guest_trees
from meminit.core import results, units
from meminit.guest import ktap, selftest_results, selftests, vm
from meminit.kernel import build, memmap_log
from meminit.scenarios import soak
from meminit.scenarios import memmap

pytestmark = pytest.mark.kernel

PMEM = 1536 << 20
REBINDS = 2
# One 1 GiB page reserved at boot, so the folio_zero_user suite clears a gigantic folio.
HUGETLB_1G_POOL = 1
# KUnit's attribute filter: the cases not marked slow (KUNIT_CASE_SLOW)
OTHER_PREEMPT_KUNIT_FILTER = "kunit.filter=speed>slow"


@dataclass
class SeriesBoot:
    kernel: build.Kernel
    run_dir: Path
    result: vm.BootResult
    accel: str


def boot_with_rebinds(kernel: build.Kernel, run_dir: Path, accel: str, name: str,
                      rebinds: int, append: list[str]) -> SeriesBoot:
    """Boot `kernel` (the built-in KUnit suites run at boot), load its KUnit modules, and
    rebind a small fsdax namespace `rebinds` times per mode, with one 1 GiB page reserved
    for folio_zero_user's gigantic case. The modules load first: the rebinds leave the
    test-only mode switch forced, and zone_device_memmap checks the mode the kernel picks."""
    memory, memmap_param = vm.pmem_layout(PMEM, None)
    script = run_dir / "guest.sh"
    script.write_text(ktap.LOAD_KUNIT_MODULES + memmap.guest_script(memmap.BY_NAME["fsdax-mapdev"], ["all"], rebinds)
                      + "uname -r > uname.txt\n"
                      + "cat /sys/bus/nd/devices/namespace0.0/numa_node > pmem-node.txt\n")
    memory += HUGETLB_1G_POOL * units.GIB
    spec = vm.BootSpec(image=kernel.image, kernel=kernel.variant, name=name, script=f"bash {shlex.quote(str(script))}",
                       memory_bytes=memory, cpus=2, numa=vm.numa_pmem_layout(memory, 2),
                       append=[*append, memmap_param, "hugepagesz=1G", f"hugepages={HUGETLB_1G_POOL}"],
                       timeout_s=1200)
    result = vm.boot(spec, run_dir, accel)
    return SeriesBoot(kernel=kernel, run_dir=run_dir, result=result, accel=accel)


@pytest.fixture(scope="module")
def series_boot(kernel_trees) -> SeriesBoot:
    kernel = build.kernel_for("debug", kernel_trees)
    build.build(kernel)
    run_dir = results.new_run_dir("test")
    accel = vm.resolve_accel("auto", kernel.image, run_dir, kernel.variant)
    return boot_with_rebinds(kernel, run_dir, accel, "series", REBINDS, [])


@pytest.fixture(scope="module")
def preempt_other_boot(series_boot) -> SeriesBoot:
    """The same kernel booted with the kernel's other preemption model (PREEMPT_DYNAMIC;
    6.12: none, 7.3: lazy): KUnit and one rebind per mode.

    On 6.12 folio_zero_user() clears in bounded units with reschedule points under the
    none and voluntary models and whole folios under full preemption, and the threaded
    memmap init meets a caller that is not preemptible between its reschedule points:
    both models must pass.
    """
    model = series_boot.kernel.linux.other_preempt
    run_dir = series_boot.run_dir / f"preempt-{model}"
    run_dir.mkdir(exist_ok=True)
    append = [f"preempt={model}"]
    if series_boot.kernel.linux.other_preempt_preemptible:
        # folio_zero_user() clears as under full preemption there: its slow 1 GiB case
        # (two minutes under TCG) would only repeat the first boot's
        append.append(OTHER_PREEMPT_KUNIT_FILTER)
    return boot_with_rebinds(series_boot.kernel, run_dir, series_boot.accel, f"preempt-{model}", 1, append)


def check_rebinds(boot: SeriesBoot, rebinds: int) -> None:
    """`rebinds` timed binds per mode of the kernel, each of the same non-zero number of
    pages, on two threads where the kernel carries the threads RFC (none said otherwise),
    with the same struct pages in every mode."""
    samples = memmap_log.parse_init_samples(boot.result.dmesg.read_text(errors="replace"))
    done = [s for s in samples if s.phase == "rebind"]
    modes = set((boot.run_dir / "modes-available.txt").read_text().split())
    assert {s.variant for s in done} == modes
    assert len(done) == rebinds * len(modes)
    # every rebind initialises the same, non-zero number of pages
    assert len({s.pages for s in done}) == 1 and done[0].pages > 0
    # the range is above the threads RFC's threshold and the guest has 2 CPUs; without that
    # part the init line names no threads
    threads = 2 if "threads" in boot.kernel.linux.rfcs else None
    assert {s.threads for s in done} == {threads}, [(s.variant, s.threads) for s in done]
    # a forced mode runs as itself (x86-64 has the streaming backend, the debug kernel no
    # KASAN), and the default streams this altmap memmap: patch 7's memmap_init_default_mode()
    ran = {(s.variant, s.iteration): s.modes for s in done}
    assert all(m == ("streaming" if v == "default" else v,) for (v, _), m in ran.items()), ran
    hashes = boot.run_dir / "hashes.txt"
    assert hashes.exists(), "the series' memmap_hash debugfs file did not produce hashes"
    assert len(memmap_log.parse_hashes(hashes.read_text())) == len(modes)
    assert memmap_log.hash_mismatch(memmap_log.parse_hashes(hashes.read_text())) is None


def check_kunit(boot: SeriesBoot, kernel_src: Path, name: str) -> None:
    kunit = ktap.parse(boot.result.console.read_text(errors="replace"), kernel_src)
    summary = boot.run_dir / f"{name}.kunit.txt"
    summary.write_text(kunit.summary + "\n")
    # our suites skip only what the machine cannot offer; this boot offers everything
    problems = ktap.gate(kunit, ktap.required_suites(boot.kernel.linux), skips_allowed=False)
    assert not problems, f"{problems}; see {summary}"


@pytest.fixture(scope="module")
def short_soak(kernel_trees, series_boot) -> soak.SoakOutcome:
    """soak.SHORT_CYCLES cycles of every scenario, with CPU hotplug and injected faults
    (where it is ported: Linux.long_guests)."""
    long_guest_trees(kernel_trees, "soak")
    if not set(soak.SOAK_RFCS) <= set(kernel_trees.linux.rfcs):
        pytest.skip(f"the soak needs the RFC parts {','.join(soak.SOAK_RFCS)}: "
                    f"`meminit test --long --rfc {','.join(soak.SOAK_RFCS)}`")
    run_dir = series_boot.run_dir / "soak"
    run_dir.mkdir(exist_ok=True)
    request = soak.SoakRequest(scenarios=list(memmap.BY_NAME), cycles=soak.SHORT_CYCLES,
                               guest=vm.GuestRequest(accel=series_boot.accel, timeout=2400))
    outcome = soak.soak(series_boot.kernel, request, run_dir)
    (run_dir / "soak.txt").write_text(outcome.table + "\n")
    return outcome


@pytest.fixture(scope="module")
def fast_selftests(kernel_trees, series_boot) -> list[selftest_results.Outcome]:
    """The test command's subset of the mm selftests of the kernel's own tree, built from
    the pristine tree (where it is ported: Linux.long_guests)."""
    long_guest_trees(kernel_trees, "selftests")
    tests = selftests.fast(series_boot.kernel.linux)
    bin_dir = selftests.build_selftests(tests, jobs=2, linux=series_boot.kernel.linux)
    return selftests.run_kernel(series_boot.kernel, tests, bin_dir,
                                series_boot.run_dir / "selftests", vm.GuestRequest(accel=series_boot.accel),
                                selftests.SelftestsRequest().hugetlb_pages)


def test_guest_runs_our_kernel(series_boot):
    assert series_boot.result.exit_code == 0, series_boot.result.console
    uname = (series_boot.run_dir / "uname.txt").read_text().strip()
    assert uname == series_boot.kernel.release
    assert uname.endswith("-meminit-debug")


def test_pmem_sits_on_the_node_without_cpus(series_boot):
    log = series_boot.result.console.read_text(errors="replace")
    assert "smp: Brought up 2 nodes, 2 CPUs" in log
    assert (series_boot.run_dir / "pmem-node.txt").read_text().strip() == "1"
    if "threads" not in series_boot.kernel.linux.rfcs:
        return   # the per-thread lines below are the threads RFC's
    # the init's per-thread lines name that node, and CPUs of node 0 ran the threads
    dmesg = series_boot.result.dmesg.read_text(errors="replace")
    binds = [s for s in memmap_log.parse_init_samples(dmesg) if s.phase == "rebind"]
    assert binds and all(s.nodes == (1,) and s.cpus and set(s.cpus) <= {0, 1} for s in binds), \
        [(s.variant, s.iteration, s.where()) for s in binds]


def test_boot_log_has_no_oops_or_warning(series_boot):
    log = series_boot.result.console.read_text(errors="replace")
    assert "Linux version" in log
    assert vm.kernel_failures(log) == []


def test_kunit_suites_pass(series_boot, kernel_trees):
    check_kunit(series_boot, kernel_trees.series, "series")


def test_kunit_suites_pass_under_the_other_preemption_model(preempt_other_boot, kernel_trees):
    model = kernel_trees.linux.other_preempt
    log = preempt_other_boot.result.console.read_text(errors="replace")
    assert f"Dynamic Preempt: {model}" in log, f"the kernel did not switch to preempt={model}"
    assert preempt_other_boot.result.exit_code == 0, preempt_other_boot.result.stderr_tail()
    check_kunit(preempt_other_boot, kernel_trees.series, f"preempt-{model}")
    # the slow case left out where the model clears as full does, and only there
    gigantic = "folio_zero_user_gigantic" in log
    assert gigantic != kernel_trees.linux.other_preempt_preemptible, \
        f"folio_zero_user_gigantic {'ran' if gigantic else 'did not run'} under preempt={model}"


def test_pmem_rebinds_under_the_other_preemption_model(preempt_other_boot):
    check_rebinds(preempt_other_boot, 1)


def test_pmem_rebinds_are_timed_for_every_variant(series_boot):
    check_rebinds(series_boot, REBINDS)


def test_short_soak_passes(short_soak):
    assert short_soak.problems == [], short_soak.table
    assert short_soak.hotplug not in ("0", "off", "failed"), short_soak.table
    for result in short_soak.results:
        assert result.injected and all(result.injected.values()), short_soak.table


def test_fast_mm_selftests_pass(fast_selftests):
    """Every program of the subset passes outright: a skip would hide what it checks."""
    table = selftest_results.render({"debug": fast_selftests})
    assert [o.status for o in fast_selftests] == ["PASS"] * len(fast_selftests), table
    # the programs that print KTAP ran cases, and kunit.py found them
    assert sum(len(o.cases) for o in fast_selftests) > 0, table
