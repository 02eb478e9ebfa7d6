"""Guest scenarios: ZONE_DEVICE ranges re-initialised N times, memmap init timed per bind.

A scenario boots each kernel once. The guest creates the device (an emulated pmem
namespace, or test_hmm's device-private chunks; the first bind, reported apart), then
unbinds and binds it `rebinds` times per variant, the
variants interleaved (slow template streaming slow template ...). Variants come from
the series' runtime switch when the kernel has one; a kernel without it (base) has one
variant, "default". Before each bind the guest writes a marker to /dev/kmsg, so every
`memmap_init_zone_device initialised ...` line of dmesg is attributed to a variant.
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TypeVar

from meminit import build, deps, faults, fork, latency, microbench, report, source, vm
from meminit.errors import MeminitError

MODE_FILE = "/sys/kernel/debug/zone_device/memmap_init_mode"
HASH_FILE = "/sys/kernel/debug/zone_device/memmap_hash"
THREADS_FILE = "/sys/kernel/debug/zone_device/memmap_init_threads"
MARK = "meminit-mark"
# Built-in KUnit suites run at every boot; the test command runs them, scenarios need not.
SKIP_KUNIT = "kunit.enable=0"

INIT_LINE = re.compile(
    r"memmap_init_zone_device initialised (?P<pages>\d+) pages in (?P<ms>\d+)ms"
    r"(?: \((?P<ns>\d+) ns, mode (?P<mode>[\w-]+)(?:, threads (?P<threads>\d+))?\))?")
# patch 10: one line per thread of a range, before the range's INIT_LINE
THREAD_LINE = re.compile(r"memmap_init_run: pfn \S+ node (?P<node>-?\d+), thread \d+: (?P<chunks>\d+) chunks, "
                         r"started on CPU (?P<cpu>-?\d+)(?P<moved>, a later chunk on another)?")
_MARK_LINE = re.compile(MARK + r" (?P<phase>first|rebind) (?P<variant>[\w-]+) (?P<iteration>\d+)")
_HASH_LINE = re.compile(MARK + r"-hash (?P<variant>[\w-]+) (?P<iteration>\d+) (?P<hash>\S+)")


@dataclass(frozen=True)
class Scenario:
    """A device whose memmap is initialised by `setup` (the first bind) and then by every `bind`."""

    name: str
    help: str
    setup: str
    unbind: str
    bind: str
    uses_pmem: bool


def _pmem(name: str, help_text: str, mode: list[str]) -> Scenario:
    create = shlex.join(["ndctl", "create-namespace", "-f", "-e", "namespace0.0", *mode])
    return Scenario(name, help_text, setup=create, unbind="ndctl disable-namespace namespace0.0",
                    bind="ndctl enable-namespace namespace0.0", uses_pmem=True)


SCENARIOS = {
    s.name: s for s in (
        _pmem("fsdax-mapdev", "fsdax namespace, memmap in the device (altmap): rebind nd_pmem",
              ["--mode=fsdax", "--map=dev"]),
        _pmem("devdax-2m", "devdax namespace, 2 MiB compound pages: rebind dax_pmem",
              ["--mode=devdax", "--align=2M"]),
        # lib/test_hmm.c memremap_pages() two 256 MiB MEMORY_DEVICE_PRIVATE chunks at load
        # and unmaps them at unload: the reviewer's DRAM-backed memmap case, on any kernel.
        Scenario("device-private", "DRAM-backed memmap: modprobe/rmmod test_hmm (2 x 256 MiB)",
                 setup="modprobe test_hmm", unbind="rmmod test_hmm", bind="modprobe test_hmm",
                 uses_pmem=False),
    )
}


@dataclass(frozen=True)
class InitSeen:
    """What the kernel's debug lines said about one bind, summed over the ranges it mapped."""

    ranges: int = 0  # timing lines seen
    pages: int = 0
    ms: float = 0.0  # nanosecond-resolution when the kernel prints ns, else jiffies-resolution ms
    resolution: str = "jiffies"  # "ns" or "jiffies"
    modes: tuple[str, ...] = ()  # modes the kernel reports (a fast mode may fall back to slow)
    threads: int | None = None  # most threads any range used
    nodes: tuple[int, ...] = ()  # node of each range (the series' per-thread lines)
    cpus: tuple[int, ...] = ()  # CPUs the threads started their first chunk on
    moved: bool = False  # a thread started a later chunk on another CPU

    def where(self) -> str:
        """'node 1, CPUs 0,1' for a report; '+' after the CPUs when a thread moved on."""
        if not self.nodes:
            return "-"
        nodes = ",".join(map(str, self.nodes))
        cpus = ",".join(map(str, self.cpus)) or "none"
        return f"node {nodes}, CPUs {cpus}{'+' if self.moved else ''}"

    def add(self, line: re.Match) -> "InitSeen":
        """This bind with one more range's timing line (INIT_LINE) counted in."""
        ns = line.group("ns")
        mode = (line.group("mode"),) if line.group("mode") else ()
        threads = [t for t in (self.threads, line.group("threads")) if t is not None]
        return replace(self, ranges=self.ranges + 1, pages=self.pages + int(line.group("pages")),
                       ms=self.ms + (int(ns) / 1e6 if ns else float(line.group("ms"))),
                       resolution="ns" if ns else "jiffies",
                       modes=tuple(dict.fromkeys(self.modes + mode)),
                       threads=max(map(int, threads), default=None))

    def add_thread(self, line: re.Match) -> "InitSeen":
        """This bind with one thread's line (THREAD_LINE) counted in."""
        cpus = self.cpus
        if int(line.group("chunks")):
            cpus = tuple(sorted(set(cpus) | {int(line.group("cpu"))}))
        return replace(self, nodes=tuple(sorted(set(self.nodes) | {int(line.group("node"))})),
                       cpus=cpus, moved=self.moved or bool(line.group("moved")))


def where_ran(seen: Iterable[InitSeen]) -> str:
    """InitSeen.where() over several binds."""
    seen = list(seen)
    return InitSeen(nodes=tuple(sorted({n for s in seen for n in s.nodes})),
                    cpus=tuple(sorted({c for s in seen for c in s.cpus})),
                    moved=any(s.moved for s in seen)).where()


K = TypeVar("K")


def parse_inits(dmesg: str, mark: re.Pattern[str], key: Callable[[re.Match[str]], K]) -> dict[K, InitSeen]:
    """Attribute each timing and thread line to the last `mark` before it, keyed by key(mark)."""
    seen: dict[K, InitSeen] = {}
    current: K | None = None
    for text in dmesg.splitlines():
        if m := mark.search(text):
            current = key(m)
        elif current is None:
            continue
        elif m := INIT_LINE.search(text):
            seen[current] = seen.get(current, InitSeen()).add(m)
        elif m := THREAD_LINE.search(text):
            seen[current] = seen.get(current, InitSeen()).add_thread(m)
    return seen


@dataclass(frozen=True)
class InitSample(InitSeen):
    """One bind of a scenario: its marker's phase, variant and iteration, and what it did."""

    phase: str = "rebind"  # "first" (namespace creation) or "rebind"
    variant: str = "default"
    iteration: int = 0


def parse_init_samples(dmesg: str) -> list[InitSample]:
    """One sample per marked bind that initialised anything; a bind's ranges are summed."""
    marked = parse_inits(dmesg, _MARK_LINE,
                         lambda m: (m.group("phase"), m.group("variant"), int(m.group("iteration"))))
    return [InitSample(**asdict(seen), phase=k[0], variant=k[1], iteration=k[2])
            for k, seen in marked.items() if seen.ranges]


def parse_hashes(text: str) -> dict[str, list[str]]:
    hashes: dict[str, list[str]] = {}
    for m in _HASH_LINE.finditer(text):
        hashes.setdefault(m.group("variant"), []).append(m.group("hash"))
    return hashes


def hash_mismatch(hashes: dict[str, list[str]]) -> str | None:
    """None when every variant's memmap hashed the same, else a description of the difference."""
    distinct = {h for values in hashes.values() for h in values}
    if len(distinct) <= 1:
        return None
    return "; ".join(f"{v}: {' '.join(sorted(set(hs)))}" for v, hs in hashes.items())


def memmap_hash_function() -> str:
    """Bash: memmap_hash_of SCENARIO prints the hash of the bound range's struct pages.

    One 16-hex-digit hash per range (device-private may map several), from the TEST ONLY
    memmap_hash debugfs file (patch 16); returns 5, saying why on stderr, when it cannot.
    """
    return f"""memmap_hash_of() {{
    local ranges range start end pages hash out=""
    case "$1" in
    device-private) ranges=$(grep -F hmm_dmirror /proc/iomem) ;;
    # devdax maps the dax0.0 range (inside the namespace), fsdax the namespace itself
    *) ranges=$(grep -m1 -F 'dax0.0' /proc/iomem || grep -m1 -F 'namespace0.0' /proc/iomem) ;;
    esac
    [ -n "$ranges" ] || {{ echo "no range of $1 in /proc/iomem" >&2; cat /proc/iomem >&2; return 5; }}
    for range in $(echo "$ranges" | tr -d ' ' | cut -d: -f1); do
        start=$(( 0x${{range%-*}} >> 12 ))
        end=$(( (0x${{range#*-}} + 1) >> 12 ))
        if [ "$1" != device-private ]; then
            # with an altmap the first PFNs hold the memmap and are not initialised
            pages=$(dmesg | grep -o 'memmap_init_zone_device initialised [0-9]* pages' | tail -1 | awk '{{print $3}}')
            [ -n "$pages" ] || {{ echo "no timing line for $1 in dmesg" >&2; return 5; }}
            start=$(( end - pages ))
        fi
        echo "$start $(( end - start ))" > {HASH_FILE} || {{
            echo "memmap_hash refused PFNs $start-$end (range $range)" >&2; cat /proc/iomem >&2; return 5; }}
        # $(...) ignores set -e: a failed or empty read must fail here, not hash as ""
        hash=$(cat {HASH_FILE}) && [ -n "$hash" ] || {{
            echo "reading {HASH_FILE} for PFNs $start-$end failed" >&2; return 5; }}
        out="$out$hash"
    done
    echo "$out"
}}"""


def guest_script(scenario: Scenario, variants: list[str], rebinds: int, threads: int | None = None) -> str:
    """Bash run in the guest; its files land in the shared run directory (the cwd)."""
    return f"""#!/bin/bash
# {scenario.name}: generated by meminit (scenarios.py)
set -eu
mountpoint -q /sys/kernel/debug || mount -t debugfs debugfs /sys/kernel/debug
echo 'file mm/mm_init.c +p' > /sys/kernel/debug/dynamic_debug/control
mark() {{ echo "{MARK} $*" > /dev/kmsg; }}
variants="{' '.join(variants)}"
if [ -e {MODE_FILE} ]; then
    tr -d '[]' < {MODE_FILE} > modes-available.txt
    [ "$variants" = all ] && variants=$(cat modes-available.txt)
    for v in $variants; do grep -qw "$v" modes-available.txt || {{ echo "kernel has no mode $v" >&2; exit 4; }}; done
else
    variants=default
fi
threads="{'' if threads is None else threads}"
if [ -n "$threads" ] && [ -e {MODE_FILE} ]; then
    [ -e {THREADS_FILE} ] || {{ echo "kernel has no {THREADS_FILE}" >&2; exit 4; }}
    echo "$threads" > {THREADS_FILE}
fi
{memmap_hash_function()}
hash_memmap() {{
    [ -e {HASH_FILE} ] && {'true' if scenario.uses_pmem else 'false'} || return 0
    local hash
    hash=$(memmap_hash_of {scenario.name}) || exit 5
    echo "{MARK}-hash $1 $2 $hash" >> hashes.txt
}}
# The first bind runs in the kernel's default mode (the bracketed one), or "default".
first=default
[ -e {MODE_FILE} ] && first=$(grep -o '\\[[a-z-]*\\]' {MODE_FILE} | tr -d '[]')
mark first "$first" 0
if ! {scenario.setup} > setup.out 2> setup.err; then
    echo "setup failed: {scenario.setup}" >&2; cat setup.err >&2; exit 3
fi
for i in $(seq 1 {rebinds}); do
    for v in $variants; do
        [ "$v" = default ] || echo "$v" > {MODE_FILE}
        {scenario.unbind} > /dev/null
        mark rebind "$v" "$i"
        {scenario.bind} > /dev/null
        hash_memmap "$v" "$i"
    done
done
"""


def boot_script(spec: vm.BootSpec, run_dir: Path, accel: str, output: Path | None = None) -> vm.BootResult:
    """Boot and run spec.script; a non-zero exit fails with the script's stderr and where to look."""
    result = vm.boot(spec, run_dir, accel)
    if result.exit_code != 0:
        where = f"output: {output}; " if output else ""
        raise MeminitError(f"{spec.name}: guest script failed with exit {result.exit_code}:\n"
                           f"{result.stderr_tail()}\n{where}console: {result.console}")
    return result


def group_samples(kernel: str, samples: list[InitSample]) -> list[dict]:
    first = next((s for s in samples if s.phase == "first"), None)
    groups = []
    for variant in dict.fromkeys(s.variant for s in samples if s.phase == "rebind"):
        steady = [s for s in samples if s.phase == "rebind" and s.variant == variant]
        steady.sort(key=lambda s: s.iteration)
        groups.append({
            "kernel": kernel, "variant": variant, "pages": steady[0].pages,
            "first_ms": first.ms if first and first.variant in (variant, "default") else None,
            "steady_ms": [s.ms for s in steady], "resolution": steady[0].resolution,
            "modes_used": sorted({mode for s in steady for mode in s.modes}),
            "threads": sorted({s.threads for s in steady if s.threads is not None}),
            "ran_on": where_ran(steady),
        })
    return groups


def guest_memory(scenario: Scenario, args: argparse.Namespace) -> tuple[int, list[str]]:
    """Guest memory and kernel parameters; refuses pmem the guest cannot address."""
    if scenario.uses_pmem:
        memory, memmap_param = vm.pmem_layout(args.pmem_size, args.memory)
        return memory, [memmap_param]
    return args.memory or vm.DEFAULT_MEMORY, []


def run_scenario(scenario: Scenario, kernel: build.Kernel, run_dir: Path, accel: str,
                 args: argparse.Namespace) -> list[dict]:
    memory, params = guest_memory(scenario, args)
    script = run_dir / f"{scenario.name}-{kernel.variant}.sh"
    script.write_text(guest_script(scenario, args.variants, args.rebinds, args.init_threads))
    name = f"{scenario.name}-{kernel.variant}"
    spec = vm.BootSpec(image=kernel.image, name=name, script=f"bash {shlex.quote(str(script))}",
                       memory_bytes=memory, cpus=args.cpus,
                       append=[*params, SKIP_KUNIT, *args.append],
                       timeout_s=args.timeout)
    result = boot_script(spec, run_dir, accel)
    samples = parse_init_samples(result.dmesg.read_text(errors="replace"))
    if not any(s.phase == "rebind" for s in samples):
        raise MeminitError(f"{name}: no memmap_init_zone_device timings in {result.dmesg}")
    hashes_file = run_dir / "hashes.txt"
    if hashes_file.exists():
        mismatch = hash_mismatch(parse_hashes(hashes_file.read_text()))
        hashes_file.rename(run_dir / f"{name}.hashes.txt")
        if mismatch:
            raise MeminitError(f"{name}: struct pages differ between variants ({mismatch})")
    return group_samples(kernel.variant, samples)


FORK_SCENARIO = "fork"


def run_fork(kernel: build.Kernel, run_dir: Path, accel: str, args: argparse.Namespace) -> list[dict]:
    """forkbench in the guest: forks/s of a process with N VMAs (maple tree __mt_dup())."""
    binary = fork.build_forkbench()
    out = run_dir / f"fork-{kernel.variant}.jsonl"
    command = fork.forkbench_command(binary, args.fork_vmas, args.fork_seconds, reps=args.fork_reps)
    spec = vm.BootSpec(image=kernel.image, name=f"fork-{kernel.variant}",
                       script=f"{command} > {shlex.quote(str(out))}",
                       memory_bytes=args.memory or vm.DEFAULT_MEMORY, cpus=args.cpus,
                       append=[SKIP_KUNIT, *args.append], timeout_s=args.timeout)
    boot_script(spec, run_dir, accel, output=out)
    return fork.parse_forkbench(out.read_text())


def run_faults(kernel: build.Kernel, run_dir: Path, accel: str, args: argparse.Namespace) -> list[dict]:
    """The benchmark's huge-page fault test in the guest (thp-fault scenario)."""
    binary = microbench.build()
    name = f"{faults.SCENARIO}-{kernel.variant}"
    out = run_dir / f"{name}.txt"
    script = run_dir / f"{name}.sh"
    script.write_text(faults.guest_script(binary, args.fault_size, args.fault_reps, out))
    spec = vm.BootSpec(image=kernel.image, name=name, script=f"bash {shlex.quote(str(script))}",
                       memory_bytes=faults.guest_memory(args.fault_size, args.memory), cpus=args.cpus,
                       append=[*faults.boot_parameters(args.fault_size), SKIP_KUNIT, *args.append],
                       timeout_s=args.timeout)
    boot_script(spec, run_dir, accel, output=out)
    rows = faults.summarize(out.read_text())
    if not any(r.get("gbps") for r in rows):
        raise MeminitError(f"{name}: no fault samples in {out}")
    return rows


def run_latency(kernel: build.Kernel, model: str, run_dir: Path, accel: str,
                args: argparse.Namespace) -> list[dict]:
    """cyclictest beside 1 GiB clears in one boot per preemption model (fault-latency)."""
    units = args.latency_units if kernel.variant != "base" else [latency.DEFAULT_UNIT]
    name = f"{latency.SCENARIO}-{kernel.variant}-{model}"
    script = run_dir / f"{name}.sh"
    script.write_text(latency.guest_script(kernel.variant, model, units, args.latency_hog,
                                           args.latency_rounds, args.latency_seconds, run_dir,
                                           args.latency_trace))
    spec = vm.BootSpec(image=kernel.image, name=name, script=f"bash {shlex.quote(str(script))}",
                       memory_bytes=args.memory or latency.GUEST_MEMORY, cpus=max(args.cpus, 2),
                       append=[*latency.boot_parameters(model), SKIP_KUNIT, *args.append],
                       timeout_s=args.timeout)
    boot_script(spec, run_dir, accel)
    samples = []
    for cell in latency.cells(kernel.variant, model, units, args.latency_hog, args.latency_rounds):
        sample = latency.read_cell(cell, run_dir) | latency.trace_report(cell, run_dir)
        if "trace" in sample:
            print(f"{cell.stem}: worst {sample['max_us']} µs; CPU 1's longest silence "
                  f"{sample['silence_ms']} ms ({sample['silence_other_cpu_events']} events of "
                  f"other CPUs meanwhile),\n  after  {sample['silence_before']}\n"
                  f"  before {sample['silence_after']}\n  ({run_dir / sample['trace']})",
                  file=sys.stderr, flush=True)
        samples.append(sample)
    return samples


def guest_memory_for(name: str, args: argparse.Namespace) -> int:
    if name in SCENARIOS:
        return guest_memory(SCENARIOS[name], args)[0]
    if name == faults.SCENARIO:
        return faults.guest_memory(args.fault_size, args.memory)
    if name == latency.SCENARIO:
        return args.memory or latency.GUEST_MEMORY
    return args.memory or vm.DEFAULT_MEMORY


def run(args: argparse.Namespace) -> Path:
    """Build what is needed, boot every kernel, write result.json and print the table."""
    scenario_names = args.scenario or ["fsdax-mapdev"]
    memories = [guest_memory_for(n, args) for n in scenario_names]  # refuses impossible sizes before building
    deps.ensure(deps.GUEST)
    kernels = build.build_variants(args.kernels, jobs=args.jobs)
    run_dir = report.new_run_dir("run")
    accel = vm.resolve_accel(args.accel, kernels[args.kernels[0]].image, run_dir)
    result = {
        "kind": "memmap", "accel": accel, "guest_cpus": args.cpus, "init_threads": args.init_threads,
        "guest_memory": vm.format_size(max(memories)), "pmem_size": vm.format_size(args.pmem_size),
        "rebinds": args.rebinds, "source_package": source.SOURCE_PACKAGE,
        "source_version": source.source_version(), "series_commit": source.series_commit(),
        "kernels": {v: k.release for v, k in kernels.items()}, "scenarios": [],
    }
    for name in scenario_names:
        if name == FORK_SCENARIO:
            runs = {variant: run_fork(kernels[variant], run_dir, accel, args) for variant in args.kernels}
            result["scenarios"].append({"name": name, "kind": "fork", "runs": runs})
        elif name == faults.SCENARIO:
            runs = {variant: run_faults(kernels[variant], run_dir, accel, args) for variant in args.kernels}
            result["scenarios"].append({"name": name, "kind": "faults", "runs": runs,
                                        "fault_size": vm.format_size(args.fault_size)})
        elif name == latency.SCENARIO:
            samples = [sample for model in args.preempt for variant in args.kernels
                       for sample in run_latency(kernels[variant], model, run_dir, accel, args)]
            result["scenarios"].append({"name": name, "kind": "latency", "samples": samples,
                                        "rows": latency.summarize(samples),
                                        "seconds": args.latency_seconds, "rounds": args.latency_rounds})
        else:
            groups: list[dict] = []
            for variant in args.kernels:
                groups += run_scenario(SCENARIOS[name], kernels[variant], run_dir, accel, args)
            result["scenarios"].append({"name": name, "kind": "memmap", "groups": groups})
        report.write_json(run_dir, result)
    print(report.render(result))
    for png in report.plot(result, run_dir):
        print(f"plot: {png}", file=sys.stderr)
    print(f"results: {run_dir / 'result.json'}", file=sys.stderr)
    return run_dir


def _cmd_run(args: argparse.Namespace) -> int:
    run(args)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="the main job: build, boot and time memmap init per scenario")
    p.add_argument("--scenario", action="append", choices=[*SCENARIOS, FORK_SCENARIO, faults.SCENARIO, latency.SCENARIO],
                   help="scenario to run (repeatable; default fsdax-mapdev)")
    p.add_argument("--kernels", type=lambda s: s.split(","), default=["series", "base"],
                   help="comma-separated kernels to boot, first decides the accelerator "
                        "(default series,base)")
    p.add_argument("--variants", type=lambda s: s.split(","), default=["all"],
                   help="series init modes to interleave, e.g. slow,template "
                        "(default: every mode the kernel offers)")
    p.add_argument("--pmem-size", type=vm.parse_size, default=vm.parse_size("2G"),
                   help="emulated pmem size (default 2G; multiple of 128M)")
    p.add_argument("--init-threads", type=int, default=None,
                   help="series kernels: most threads for one range's memmap init "
                        "(0 = the kernel's automatic choice, its default; 1 = single-threaded)")
    p.add_argument("--rebinds", type=int, default=5, help="rebinds per variant (default 5)")
    p.add_argument("--fork-vmas", type=lambda s: [int(n) for n in s.split(",")],
                   default=list(fork.DEFAULT_COUNTS), help="fork scenario: VMA counts (default "
                   + ",".join(map(str, fork.DEFAULT_COUNTS)) + ")")
    p.add_argument("--fork-seconds", type=float, default=2.0, help="fork scenario: seconds per N and rep")
    p.add_argument("--fork-reps", type=int, default=3, help="fork scenario: interleaved repetitions")
    p.add_argument("--fault-size", type=vm.parse_size, default=faults.DEFAULT_FAULT_SIZE,
                   help="thp-fault scenario: bytes faulted per mapping kind and pass (default "
                   f"{vm.format_size(faults.DEFAULT_FAULT_SIZE)}; multiple of 1G)")
    p.add_argument("--fault-reps", type=int, default=faults.DEFAULT_REPS,
                   help=f"thp-fault scenario: repetitions (default {faults.DEFAULT_REPS})")
    p.add_argument("--preempt", type=latency.parse_models, default=list(latency.MODELS),
                   help="fault-latency scenario: preemption models, one boot each "
                        f"(default {','.join(latency.MODELS)})")
    p.add_argument("--latency-units", type=latency.parse_units, default=list(latency.DEFAULT_UNITS),
                   help="fault-latency scenario: series clearing units to interleave, 'default' "
                        f"being the kernel's choice (default {','.join(latency.DEFAULT_UNITS)})")
    p.add_argument("--latency-seconds", type=int, default=latency.DEFAULT_SECONDS,
                   help=f"fault-latency scenario: cyclictest seconds per cell (default {latency.DEFAULT_SECONDS})")
    p.add_argument("--latency-rounds", type=int, default=latency.DEFAULT_ROUNDS,
                   help=f"fault-latency scenario: rounds over the units (default {latency.DEFAULT_ROUNDS})")
    p.add_argument("--latency-hog", type=lambda s: [h for h in s.split(",") if h], default=list(latency.HOGS),
                   help="fault-latency scenario: memory writer on CPU 0, off and/or on (default off,on)")
    p.add_argument("--latency-trace", type=int, default=0, metavar="USEC",
                   help="fault-latency scenario, diagnostic: trace scheduler, IRQ and timer events "
                        "and stop each cell at its first wakeup this late, keeping the trace "
                        "and printing its longest silence (default 0: off)")
    p.add_argument("--timeout", type=int, default=1200, help="guest timeout in seconds")
    p.add_argument("-j", "--jobs", type=int, help="kernel build jobs (default: CPUs)")
    vm.add_guest_options(p)
    p.set_defaults(func=_cmd_run)
