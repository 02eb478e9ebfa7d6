"""`meminit soak`: many bind/unbind cycles of each scenario on the debug kernel.

One boot of the debug series kernel (DEBUG_VM, lockdep, kmemleak, fault injection) runs,
for each scenario in turn, `cycles` unbind/bind cycles that rotate the init mode (every
mode of the kernel's switch) and the thread setting (1, the kernel's automatic choice, 2).
Around them the guest:
- hashes the struct pages of the range after every bind (memmap_hash);
- reads MemFree, SUnreclaim and nr_memmap_pages with the device unbound, after dropping
  caches, so a cycle that leaks memory, slab objects or vmemmap pages shows;
- offlines and onlines CPU 1 in a loop, so helper threads meet CPU hotplug;
- in some cycles makes every allocation under memmap_init_zone_device() fail
  (failslab or fail_page_alloc, filtered by call stack to that function): the range
  must still come up, through one thread or the slow path, with the same struct pages;
- scans kmemleak after each scenario's setup and after its cycles.
The host then checks every cycle against the setup bind and the memory readings of the
last cycles against those of the first (see evaluate()).
"""

from __future__ import annotations

import json
import re
import shlex
import statistics
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

from meminit.core import deps, kernels, results, tables, units
from meminit.guest import vm
from meminit.kernel import build, memmap_log, source
from meminit.scenarios import memmap as memmap_scenarios
from meminit.core.errors import MeminitError
from meminit.core.kernels import Linux
from meminit.scenarios.soak_guest import (FAULT_KINDS, FINAL_CYCLE, HASH, SOAK_FILE,
                                fault_range, guest_script)

DEFAULT_CYCLES = 100
SHORT_CYCLES = 6  # `meminit test --long`: every mode, both fault kinds
TIMEOUT_S = 7200  # the guest's, unless --timeout
DEFAULT_PMEM = 1536 << 20  # above the 1 GiB threaded-init threshold for fsdax map=dev
# With the device unbound and caches dropped, what may differ from the first cycle: page
# allocator and slab caches, kmemleak's own objects and per-CPU lists move by a few MiB
# whatever the series does. Small leaks are kmemleak's: a 16 KiB template block leaked
# per fast cycle (kmalloc_large, counted in SUnreclaim) passes 2 MiB only after about 170
# cycles. The memmap of a device-private range is 8 MiB per 512 MiB: its pages must all
# come back.
MEMFREE_TOLERANCE_KB = 32 << 10
SUNRECLAIM_TOLERANCE_KB = 2 << 10
MEMMAP_TOLERANCE_PAGES = 0


@dataclass(frozen=True)
class KnownLeak:
    """A kmemleak report the base kernel makes as well, told by who allocated the object."""

    reason: str
    comm: str  # the task that allocated it
    frames: tuple[str, ...]  # one of these functions is in the allocation backtrace


KNOWN_BASE_LEAKS = (
    KnownLeak("lib/test_hmm.c in 6.12: dmirror_device_remove() ends with cdev_device_del() and "
              "never calls put_device(), so every unload of test_hmm leaks each device's name "
              "(dev_set_name) and driver-core private data (device_add)",
              "modprobe", ("dev_set_name", "device_add")),
)
# A report allocated under these is the series' whatever else it matches.
SERIES_FRAMES = ("memmap_init", "memremap_pages", "zone_device_page", "pagemap_range")

_SOAK_MARK = re.compile(r"meminit-soak (?P<scenario>[\w-]+) (?P<cycle>\d+)")


@dataclass(frozen=True)
class Record:
    """One line of soak.jsonl: a cycle's request and what the guest saw; cycle 0 is setup."""

    scenario: str
    cycle: int
    hash: str
    mode: str = ""
    threads: int = 0
    fault: str = "none"
    injected: int = 0
    bind_ms: int = 0
    memfree_kb: int = 0
    sunreclaim_kb: int = 0
    memmap_pages: int = -1


def parse_records(text: str) -> list[Record]:
    return [Record(**json.loads(line)) for line in text.splitlines() if line.strip()]


def parse_inits(dmesg: str) -> dict[tuple[str, int], memmap_log.InitSeen]:
    """Timing lines attributed to the last `meminit-soak SCENARIO CYCLE` mark before them."""
    return memmap_log.parse_inits(dmesg, _SOAK_MARK, lambda m: (m.group("scenario"), int(m.group("cycle"))))


_LEAK_COMM = re.compile(r'comm "(?P<comm>[^"]*)"')
_FRAME = re.compile(r"^\s+(?P<function>[\w.]+)\+0x", re.MULTILINE)


def classify_leaks(kmemleak: str) -> tuple[list[str], dict[str, int]]:
    """Split a /sys/kernel/debug/kmemleak dump into reports not known from the base kernel
    (each the report's text) and counts of known ones by reason."""
    unknown: list[str] = []
    known: dict[str, int] = {}
    for report in re.split(r"(?=^unreferenced object )", kmemleak, flags=re.MULTILINE):
        if not report.startswith("unreferenced object"):
            continue
        comm = m.group("comm") if (m := _LEAK_COMM.search(report)) else ""
        frames = [f.group("function") for f in _FRAME.finditer(report)]
        ours = any(marker in f for f in frames for marker in SERIES_FRAMES)
        match = next((k for k in KNOWN_BASE_LEAKS if not ours and comm == k.comm
                      and any(f in k.frames for f in frames)), None)
        if match:
            known[match.reason] = known.get(match.reason, 0) + 1
        else:
            unknown.append(report.strip())
    return unknown, known


@dataclass
class ScenarioSoak:
    scenario: str
    cycles: int = 0
    hash_mismatches: list[int] = field(default_factory=list)  # cycles unlike the setup bind
    memfree_lost_kb: int = 0  # median MemFree of cycles 2-4 minus that of the last readings
    sunreclaim_grown_kb: int = 0
    memmap_grown_pages: int = 0
    kmemleak_reports: int | None = None  # None: kmemleak not in the kernel
    known_leaks: dict[str, int] = field(default_factory=dict)  # base kernel's, by reason
    injected: dict[str, int] = field(default_factory=dict)  # fault kind -> failures injected
    slowest: Record | None = None
    ran_on: str = "-"  # nodes of the ranges, CPUs of the threads (memmap_log.InitSeen.where)
    problems: list[str] = field(default_factory=list)


def _expected_fallback(record: Record, init: memmap_log.InitSeen | None) -> str | None:
    """An armed fault must fail something and leave its fallback in the timing line; what
    is wrong, if anything."""
    if record.fault == "none":
        return None
    if record.injected == 0:
        return (f"cycle {record.cycle}: {record.fault} was armed but failed nothing: "
                "the fallback was not exercised")
    if init is None:
        return f"cycle {record.cycle}: no timing line"
    if record.fault == "fail_page_alloc" and init.modes != ("slow",):
        return (f"cycle {record.cycle}: fail_page_alloc failed {record.injected} allocations "
                f"but the init ran {','.join(init.modes)}, not the slow path")
    if record.fault == "failslab" and init.threads != 1:
        return (f"cycle {record.cycle}: failslab failed the helpers' array but the init ran "
                f"{init.threads} threads")
    return None


def evaluate(name: str, records: list[Record], inits: dict[tuple[str, int], memmap_log.InitSeen],
             cycles: int, kmemleak: str | None) -> ScenarioSoak:
    """Check one scenario's cycles: all ran, same struct pages as the setup bind, no memory
    lost, every armed fault injected and was survived through its fallback."""
    out = ScenarioSoak(name)
    mine = [r for r in records if r.scenario == name]
    setup = next((r for r in mine if r.cycle == 0), None)
    done = sorted((r for r in mine if r.cycle > 0), key=lambda r: r.cycle)
    out.cycles = len(done)
    out.ran_on = memmap_log.where_ran(seen for (scenario, _), seen in inits.items() if scenario == name)
    if setup is None or out.cycles != cycles:
        out.problems.append(f"{out.cycles} of {cycles} cycles ran")
    if not done:
        return out
    reference = setup.hash if setup else done[0].hash
    out.hash_mismatches = [r.cycle for r in done if r.hash != reference]
    if out.hash_mismatches:
        out.problems.append(f"struct pages differ from the setup bind in cycles {out.hash_mismatches}")
    malformed = [r.cycle for r in [*([setup] if setup else []), *done] if not HASH.fullmatch(r.hash)]
    if malformed:
        out.problems.append(f"no struct page hash read in cycles {malformed} (0: setup)")
    # Read with the device unbound before each bind and once after the last unbind. The
    # first reading still carries the setup's deferred frees (5-10 MiB of slab and MemFree
    # under TCG), so the reference is the median of the next three; the end, the median
    # of the last three: one reading that a deferred free happens to move cannot fail it.
    final = next((r for r in mine if r.cycle == FINAL_CYCLE), None)
    samples = [*done, *([final] if final else [])]
    if len(samples) >= 5:
        samples = samples[1:]
    begin, end = samples[:3], samples[-3:]

    def grown(counter: str) -> int:
        def median(readings: list[Record]) -> int:
            return int(statistics.median(getattr(r, counter) for r in readings))
        return median(end) - median(begin)

    out.memfree_lost_kb = -grown("memfree_kb")
    out.sunreclaim_grown_kb = grown("sunreclaim_kb")
    out.memmap_grown_pages = grown("memmap_pages")
    span = f"cycles {begin[0].cycle}-{begin[-1].cycle} to the last three readings"
    for what, value, limit, unit in (
            ("MemFree lost", out.memfree_lost_kb, MEMFREE_TOLERANCE_KB, "kB"),
            ("SUnreclaim grew", out.sunreclaim_grown_kb, SUNRECLAIM_TOLERANCE_KB, "kB"),
            ("nr_memmap_pages grew", out.memmap_grown_pages, MEMMAP_TOLERANCE_PAGES, "pages")):
        if value > limit:
            out.problems.append(f"{what} {value} {unit} from {span} (tolerance {limit} {unit})")
    for kind in FAULT_KINDS:
        armed = [r for r in done if r.fault == kind]
        if armed:
            out.injected[kind] = sum(r.injected for r in armed)
    if out.injected.get("failslab"):
        # one thread after failslab proves the fallback only if two threads ran unarmed
        unarmed = [inits.get((name, r.cycle)) for r in done if r.fault == "none" and r.threads == 2]
        if not any(seen and seen.threads == 2 for seen in unarmed):
            out.problems.append("no unarmed 2-thread cycle ran 2 threads, so one thread under "
                                "failslab proves no fallback")
    for r in done:
        if problem := _expected_fallback(r, inits.get((name, r.cycle))):
            out.problems.append(problem)
    out.slowest = max(done, key=lambda r: r.bind_ms)
    if kmemleak is not None:
        unknown, out.known_leaks = classify_leaks(kmemleak)
        out.kmemleak_reports = len(unknown)
        if unknown:
            out.problems.append(f"kmemleak reports {len(unknown)} unreferenced objects the base "
                                f"kernel does not leak; the first:\n{unknown[0]}")
    return out


def render(verdicts: list[ScenarioSoak], hotplug: str, splats: list[str]) -> str:
    header = ["scenario", "cycles", "ran on", "hash mismatches", "MemFree lost", "SUnreclaim grew",
              "memmap grew", "kmemleak", "faults injected", "slowest bind"]
    rows = []
    known: dict[str, int] = {}
    for r in verdicts:
        for reason, count in r.known_leaks.items():
            known[reason] = known.get(reason, 0) + count
        faults = ", ".join(f"{k} {v}" for k, v in r.injected.items()) or "-"
        slowest = (f"{r.slowest.bind_ms} ms (cycle {r.slowest.cycle}, {r.slowest.mode}, "
                   f"threads {r.slowest.threads})" if r.slowest else "-")
        rows.append([r.scenario, str(r.cycles), r.ran_on, str(len(r.hash_mismatches)),
                     f"{r.memfree_lost_kb} kB", f"{r.sunreclaim_grown_kb} kB",
                     f"{r.memmap_grown_pages} pages",
                     "-" if r.kmemleak_reports is None else str(r.kmemleak_reports), faults, slowest])
    lines = [tables.render_table(header, rows), "",
             f"CPU 1 hotplug cycles during the soak: {hotplug}",
             f"splats (BUG, WARNING, lockdep, sleeping in atomic, UBSAN): {len(splats)}"]
    lines += [f"kmemleak also reported {count} objects the base kernel leaks: {reason}"
              for reason, count in known.items()]
    lines += [f"  {s}" for s in splats[:10]]
    return "\n".join(lines)


@dataclass(frozen=True)
class SoakRequest:
    scenarios: list[str]
    cycles: int = DEFAULT_CYCLES
    pmem_size: int = DEFAULT_PMEM
    hotplug: bool = True
    inject: bool = True
    linux: Linux = kernels.DEFAULT
    guest: vm.GuestRequest = field(default_factory=vm.GuestRequest)  # memory: the pmem layout's


@dataclass
class SoakOutcome:
    run_dir: Path
    results: list[ScenarioSoak]
    hotplug: str
    splats: list[str]
    table: str

    @property
    def problems(self) -> list[str]:
        out = [f"{r.scenario}: {p}" for r in self.results for p in r.problems]
        out += [f"splat: {s}" for s in self.splats]
        if self.hotplug == "failed":
            out.append("offlining or onlining CPU 1 failed")
        return out


# the RFC parts whose modes and thread counts the soak's plan cycles through (soak_guest.MODES,
# THREAD_SETTINGS)
SOAK_RFCS = ("threads", "auto")


def require_rfcs(linux: Linux) -> None:
    """Refuses a kernel without the RFC parts the soak's plan needs."""
    if not set(SOAK_RFCS) <= set(linux.rfcs):
        raise MeminitError(f"the soak cycles through every mode, auto included, and thread count: it needs "
                           f"the series' RFC parts {','.join(SOAK_RFCS)} (--rfc {','.join(SOAK_RFCS)})")


def soak(kernel: build.Kernel, request: SoakRequest, run_dir: Path) -> SoakOutcome:
    """Boot `kernel` once, run the cycles, check them; raises only if the guest failed."""
    require_rfcs(kernel.linux)
    if request.hotplug and request.guest.cpus < 2:
        raise MeminitError("the soak's CPU hotplug loop needs at least 2 guest CPUs (--no-hotplug)")
    script = run_dir / "soak.sh"
    symbols = fault_range(kernel.out / "vmlinux") if request.inject else None
    script.write_text(guest_script(request.scenarios, request.cycles, request.hotplug,
                                   request.inject, symbols))
    uses_pmem = any(memmap_scenarios.BY_NAME[n].uses_pmem for n in request.scenarios)
    memory, params = vm.DEFAULT_MEMORY, []
    if uses_pmem:
        memory, memmap_param = vm.pmem_layout(request.pmem_size, None)
        params = [memmap_param]
    # the test guest's topology: the pmem on a node with memory and no CPUs
    spec = vm.BootSpec(image=kernel.image, kernel=kernel.variant, name="soak",
                       script=f"bash {shlex.quote(str(script))}",
                       memory_bytes=memory, cpus=request.guest.cpus,
                       numa=vm.numa_pmem_layout(memory, request.guest.cpus),
                       # every mark and timing line of a 100-cycle soak must stay in dmesg
                       append=[*params, vm.SKIP_KUNIT, "log_buf_len=16M", *request.guest.append],
                       timeout_s=request.guest.timeout or TIMEOUT_S, leaks_judged_by_caller=True)
    result = vm.boot_script(spec, run_dir, request.guest.accel)
    records = parse_records((run_dir / SOAK_FILE).read_text())
    inits = parse_inits(result.dmesg.read_text(errors="replace"))
    verdicts = []
    for name in request.scenarios:
        leak_file = run_dir / f"kmemleak-{name}.txt"
        verdicts.append(evaluate(name, records, inits, request.cycles,
                                leak_file.read_text() if leak_file.exists() else None))
    count = run_dir / "hotplug.count"
    hotplug = count.read_text().strip() if count.exists() else ("0" if request.hotplug else "off")
    splats = vm.kernel_failures(result.console.read_text(errors="replace"), leaks=False)
    return SoakOutcome(run_dir, verdicts, hotplug, splats, render(verdicts, hotplug, splats))


def run(request: SoakRequest, jobs: int | None = None) -> SoakOutcome:
    require_rfcs(request.linux)
    deps.ensure(deps.GUEST)
    kernel = build.build_variants(["debug"], jobs=jobs, linux=request.linux)["debug"]
    run_dir = results.new_run_dir("soak")
    accel = vm.resolve_accel(request.guest.accel, kernel.image, run_dir, kernel.variant)
    request = replace(request, guest=replace(request.guest, accel=accel))
    outcome = soak(kernel, request, run_dir)
    results.write_json(run_dir, {
        "kind": "soak", "accel": accel, "kernel": kernel.release, "cycles": request.cycles,
        "pmem_size": units.format_size(request.pmem_size), "guest_cpus": request.guest.cpus,
        "hotplug": outcome.hotplug, "fault_injection": request.inject,
        **source.provenance(request.linux),
        "tolerances": {"memfree_kb": MEMFREE_TOLERANCE_KB, "sunreclaim_kb": SUNRECLAIM_TOLERANCE_KB,
                       "memmap_pages": MEMMAP_TOLERANCE_PAGES},
        "scenarios": [{**r.__dict__, "slowest": r.slowest.__dict__ if r.slowest else None}
                      for r in outcome.results],
        "splats": outcome.splats, "problems": outcome.problems,
    })
    print(outcome.table)
    print(f"results: {run_dir / 'result.json'}", file=sys.stderr)
    return outcome
