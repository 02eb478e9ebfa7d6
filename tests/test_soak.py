"""The soak's plan, guest script and checks, on made-up guest output."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from meminit.kernel import memmap_log
from meminit.scenarios import soak, soak_guest
from meminit.core.errors import MeminitError


HASH = "653a8b069e4fd692"


def records(name: str, cycles: int, **changes: dict) -> list[soak.Record]:
    """A healthy soak of `cycles` cycles; changes[cycle] overrides fields of that cycle
    ("0": setup, "-1": the reading after the last unbind)."""
    out = [soak.Record(name, 0, changes.get("0", {}).get("hash", HASH))]
    for cycle, c in enumerate(soak_guest.plan(cycles, inject=True), 1):
        fields = dict(scenario=name, cycle=cycle, hash=HASH, mode=c.mode, threads=c.threads,
                      fault=c.fault, injected=3 if c.fault != "none" else 0, bind_ms=10 + cycle,
                      memfree_kb=1_000_000, sunreclaim_kb=50_000, memmap_pages=4096)
        fields.update(changes.get(str(cycle), {}))
        out.append(soak.Record(**fields))
    final = dict(scenario=name, cycle=soak_guest.FINAL_CYCLE, hash="", memfree_kb=1_000_000,
                 sunreclaim_kb=50_000, memmap_pages=4096)
    final.update(changes.get("-1", {}))
    out.append(soak.Record(**final))
    return out


def inits(name: str, cycles: int) -> dict[tuple[str, int], memmap_log.InitSeen]:
    """What the kernel would print for a healthy soak: the fallback wherever a fault hit."""
    seen = {}
    for cycle, c in enumerate(soak_guest.plan(cycles, inject=True), 1):
        mode = "slow" if c.fault == "fail_page_alloc" else c.mode
        threads = 1 if c.fault == "failslab" or c.threads == 1 else 2
        seen[(name, cycle)] = memmap_log.InitSeen(ranges=1, modes=(mode,), threads=threads,
                                                 nodes=(1,), cpus=(0, 1))
    return seen


def test_plan_rotates_modes_and_threads_and_arms_faults_only_where_they_can_hit():
    cycles = soak_guest.plan(24, inject=True)
    assert [c.mode for c in cycles[:5]] == ["slow", "template", "streaming", "auto", "slow"]
    assert [c.threads for c in cycles[::4]] == [2, 1, 0, 2, 1, 0]
    armed = [(i, c) for i, c in enumerate(cycles, 1) if c.fault != "none"]
    assert armed and all(c.mode != "slow" for i, c in armed)
    assert all((c.fault == "failslab") == (c.threads == 2) for _, c in armed)
    # within three rotations each fault meets every fast mode, fail_page_alloc both
    # thread settings it can meet
    met = {(c.fault, c.mode, c.threads) for c in soak_guest.plan(3 * soak_guest.ROTATION, inject=True)}
    for mode in soak_guest.MODES[1:]:
        assert ("failslab", mode, 2) in met
        assert ("fail_page_alloc", mode, 1) in met or ("fail_page_alloc", mode, 0) in met
    # the test command's short soak arms both kinds
    assert {c.fault for c in soak_guest.plan(soak.SHORT_CYCLES, True)} >= set(soak_guest.FAULT_KINDS)
    assert {c.fault for c in soak_guest.plan(24, inject=False)} == {"none"}


def test_guest_script_is_bash_and_carries_the_plan(tmp_path):
    symbols = soak_guest.FaultRange(text=0xffffffff81000000, start=0xffffffff81585d77,
                              end=0xffffffff81585e96)
    text = soak_guest.guest_script(["fsdax-mapdev", "device-private"], 6, hotplug=True, inject=True,
                             symbols=symbols)
    (tmp_path / "soak.sh").write_text(text)
    subprocess.run(["bash", "-n", str(tmp_path / "soak.sh")], check=True)
    assert "plan_mode=(- slow template streaming auto slow template)" in text
    assert "plan_fault=(- none none failslab none none fail_page_alloc)" in text
    assert "soak_scenario fsdax-mapdev" in text and "soak_scenario device-private" in text
    assert "hotplug_loop &" in text
    # the filter is the function's link-time range moved by the guest's KASLR offset
    assert "0xffffffff81585d77" in text and "0xffffffff81585e96" in text
    quiet = soak_guest.guest_script(["devdax-2m"], 3, hotplug=False, inject=False)
    assert "inject=0" in quiet and "plan_fault=(- none none none)" in quiet


def test_fault_range_reads_the_symbol_and_its_size(tmp_path):
    """A real object file: nm gives the function's start and size, and _text."""
    source = tmp_path / "k.c"
    source.write_text("void _text(void) {}\nint memmap_init_zone_device(int x) { return x * 3 + 1; }\n")
    subprocess.run(["cc", "-c", "-O2", "-o", str(tmp_path / "k.o"), str(source)], check=True)
    found = soak_guest.fault_range(tmp_path / "k.o")
    assert found.end > found.start >= found.text
    source.write_text("int memmap_init_range(int x) { return x; }\n")
    subprocess.run(["cc", "-c", "-o", str(tmp_path / "other.o"), str(source)], check=True)
    with pytest.raises(MeminitError, match="no _text"):
        soak_guest.fault_range(tmp_path / "other.o")
    with pytest.raises(MeminitError, match="nm"):
        soak_guest.fault_range(tmp_path / "missing")


def test_parse_inits_attributes_timing_and_thread_lines_to_the_last_mark():
    dmesg = "\n".join([
        "[ 1.0] meminit-soak fsdax-mapdev 0",
        "[ 1.1] memmap_init_run: pfn 0x140000-0x1a0000 node 1, thread 0: 7 chunks, started on CPU 1",
        "[ 1.1] memmap_init_run: pfn 0x140000-0x1a0000 node 1, thread 1: 5 chunks, started on CPU 0, a later chunk on another",
        "[ 1.1] memmap_init_zone_device initialised 100 pages in 1ms (1000 ns, mode template, threads 2)",
        "[ 2.0] meminit-soak fsdax-mapdev 3",
        "[ 2.1] memmap_init_run: pfn 0x140000-0x1a0000 node 0, thread 0: 3 chunks, started on CPU 1",
        "[ 2.1] memmap_init_run: pfn 0x140000-0x1a0000 node 0, thread 1: 0 chunks, started on CPU -1",
        "[ 2.1] memmap_init_zone_device initialised 50 pages in 1ms (1000 ns, mode slow, threads 1)",
        "[ 2.2] memmap_init_zone_device initialised 50 pages in 1ms (1000 ns, mode slow, threads 2)",
    ])
    seen = soak.parse_inits(dmesg)
    setup, third = seen[("fsdax-mapdev", 0)], seen[("fsdax-mapdev", 3)]
    assert (setup.modes, setup.threads, setup.nodes, setup.cpus, setup.moved) == (("template",), 2, (1,), (0, 1), True)
    assert (third.modes, third.threads, third.pages, third.ranges) == (("slow",), 2, 100, 2)
    # a thread that took no chunk ran nowhere
    assert third.where() == "node 0, CPUs 1"
    assert setup.where() == "node 1, CPUs 0,1+"
    assert memmap_log.where_ran([setup, third]) == "node 0,1, CPUs 0,1+"
    assert memmap_log.InitSeen().where() == "-"


def test_a_healthy_soak_has_no_problems():
    result = soak.evaluate("x", records("x", 12), inits("x", 12), 12, kmemleak="")
    assert result.problems == []
    assert result.cycles == 12 and result.kmemleak_reports == 0
    assert result.injected == {"failslab": 3, "fail_page_alloc": 6}
    assert result.slowest is not None and result.slowest.cycle == 12


def test_each_defect_is_reported():
    def problems(changes: dict, cycles: int = 12, seen=None, kmemleak: str | None = "") -> list[str]:
        return soak.evaluate("x", records("x", cycles, **changes), seen or inits("x", cycles),
                             cycles, kmemleak).problems

    assert "cycles [7]" in problems({"7": {"hash": "other"}})[0]
    assert "MemFree lost" in problems({str(c): {"memfree_kb": 1_000_000 - soak.MEMFREE_TOLERANCE_KB - 1}
                                       for c in (11, 12, -1)})[0]
    assert "SUnreclaim grew" in problems({str(c): {"sunreclaim_kb": 50_000 + soak.SUNRECLAIM_TOLERANCE_KB + 1}
                                          for c in (10, 11, 12)})[0]
    assert "nr_memmap_pages grew" in problems({"12": {"memmap_pages": 4097}, "-1": {"memmap_pages": 4097}})[0]
    assert "failed nothing" in problems({"3": {"injected": 0}})[0]
    # one armed cycle that failed nothing, among others that did
    assert "cycle 6: fail_page_alloc was armed but failed nothing" in problems({"6": {"injected": 0}})[0]
    assert "no struct page hash read in cycles [0, 5]" in "\n".join(problems({"0": {"hash": ""}, "5": {"hash": ""}}))
    # a leak after the last bind shows in the final reading; one odd reading does not fail
    assert "SUnreclaim grew" in problems({"11": {"sunreclaim_kb": 60_000}, "12": {"sunreclaim_kb": 60_000},
                                          "-1": {"sunreclaim_kb": 60_000}})[0]
    assert problems({"12": {"sunreclaim_kb": 60_000}}) == []
    assert problems({"1": {"sunreclaim_kb": 40_000, "memfree_kb": 900_000}}) == []
    seen = inits("x", 12)
    for cycle, c in enumerate(soak_guest.plan(12, True), 1):
        if c.threads == 2:
            seen[("x", cycle)] = memmap_log.InitSeen(modes=(c.mode,), threads=1)
    assert "proves no fallback" in problems({}, seen=seen)[0]
    seen = inits("x", 12)
    seen[("x", 6)] = memmap_log.InitSeen(modes=("template",), threads=1)
    assert "not the slow path" in problems({}, seen=seen)[0]
    seen = inits("x", 12)
    seen[("x", 3)] = memmap_log.InitSeen(modes=("streaming",), threads=2)
    assert "ran 2 threads" in problems({}, seen=seen)[0]
    assert "kmemleak reports 1" in problems({}, kmemleak="unreferenced object 0xffff (size 16384):")[0]
    assert "11 of 12 cycles ran" in soak.evaluate("x", records("x", 11), inits("x", 11), 12, "").problems[0]


def test_render_names_every_column():
    result = soak.evaluate("x", records("x", 12), inits("x", 12), 12, kmemleak="")
    table = soak.render([result], hotplug="42", splats=[])
    assert "x " in table and "failslab 3, fail_page_alloc 6" in table
    assert "ran on" in table and "node 1, CPUs 0,1" in table
    assert "CPU 1 hotplug cycles during the soak: 42" in table and "splats" in table


DATA = Path(__file__).parent / "data"
# What a leaked template block would look like: allocated under memmap_init_run() while
# modprobe loads test_hmm, i.e. the same task as the base kernel's test_hmm leak.
SERIES_LEAK = """unreferenced object 0xff11000012340000 (size 16384):
  comm "modprobe", pid 445, jiffies 4295048395
  backtrace (crc 1234abcd):
    ___kmalloc_large_node+0x6e/0x9a
    __kvmalloc_node_noprof+0x3a/0xa0
    memmap_init_run+0x1a2/0x3f0
    memmap_init_zone_device+0x120/0x1e0
    memremap_pages+0x3b1/0x6a0
    device_add+0x43/0x6d7
    do_one_initcall+0xc7/0x214
"""


def test_base_kernel_leaks_are_told_apart_from_the_series():
    """The fixture is the kmemleak dump of a real soak (test_hmm loaded and unloaded four
    times): every report is test_hmm's own; a report under the series' code never is."""
    unknown, known = soak.classify_leaks((DATA / "kmemleak-test_hmm.txt").read_text())
    assert unknown == [] and list(known.values()) == [14]
    unknown, known = soak.classify_leaks(SERIES_LEAK)
    assert len(unknown) == 1 and known == {}
    other = SERIES_LEAK.replace("modprobe", "bash").replace("memmap_init", "kstrdup")
    assert len(soak.classify_leaks(other)[0]) == 1
    result = soak.evaluate("x", records("x", 12), inits("x", 12), 12,
                           kmemleak=(DATA / "kmemleak-test_hmm.txt").read_text() + SERIES_LEAK)
    assert result.kmemleak_reports == 1 and "memmap_init_run" in result.problems[0]
    assert sum(result.known_leaks.values()) == 14
