"""`meminit selftests`: the kernel's own mm selftests on the base and series kernels.

The binaries are built once from the pristine tree (work/linux-base) against its exported
uapi headers, so both kernels run the very same programs. Each kernel boots once and
runs the selection below in the guest, one program at a time under `timeout`, with the
hugetlb pool run_vmtests.sh reserves. What each program's output and exit code
say is selftest_results' concern; the series must pass every program and every check
base passes, on a recheck too.
"""

from __future__ import annotations

import re
import shlex
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

from meminit.core import deps, kernels, results
from meminit.guest import selftest_results, vm
from meminit.kernel import build, source
from meminit.core.errors import MeminitError
from meminit.core.kernels import Linux

SELFTEST_DIR = "tools/testing/selftests/mm"
BUILD_DIR_NAME = "selftests-mm"  # under the kernel's build root
# run_vmtests.sh's pool: 256 MiB of default-size huge pages (2 * CPUs pages for uffd
# is less on any guest we boot)
HUGETLB_POOL_BYTES = 256 << 20
HUGEPAGE_BYTES = 2 << 20
# Two 1 GiB pages reserved at boot, so cow and gup_longterm run their gigantic hugetlb
# cases (a mapping and a dummy each), which fault folios the series clears in extents
GIGANTIC_PAGES = 2
GUEST_MEMORY = 6 << 30
# Debian's 6.12 khugepaged.c returns KSFT_SKIP without including kselftest.h (a stable
# backport's slip): define it as kselftest.h does, which an identical #define leaves alone
EXTRA_CFLAGS = "-DKSFT_SKIP=4"


@dataclass(frozen=True)
class Selftest:
    """One program run, as run_vmtests.sh runs it (its arguments included)."""

    argv: tuple[str, ...]
    timeout_s: int = 600
    fast: bool = False  # in the test command's subset: quick under TCG and passing on the series
    # the pool this program wants instead of the common one (set before it, restored after)
    hugetlb_pages: int | None = None
    # programs that print no KTAP but one line per check: OWN_FORMATS' key
    own_format: str = ""

    @property
    def name(self) -> str:
        return " ".join(self.argv)

    @property
    def binary(self) -> str:
        return self.argv[0]

    @property
    def slug(self) -> str:
        return re.sub(r"[^\w.-]+", "_", self.name).strip("_")


# What faults, clears, splits, collapses or pins THP and hugetlb memory: everything the
# series' huge page clearing (patches 13-15) reaches, and, on 6.12, hugepage-vmemmap, which
# reads the struct pages of a vmemmap-optimised hugetlb folio. Each kernel runs its own
# tree's programs as its run_vmtests.sh runs them: 7.3 renamed hugepage-mmap, -shm and
# -mremap to hugetlb-*, folded map_hugetlb into hugetlb-mmap, dropped hugepage-vmemmap,
# gives gup_test the pages per call (-n), and its khugepaged and uffd-unit-tests print KTAP.
_SHARED_HEAD = (
    Selftest(("hugetlb-madvise",), fast=True),
    # as run_vmtests.sh runs it: "needs one and only one page"
    Selftest(("hugetlb_fault_after_madv",), hugetlb_pages=1),
    Selftest(("cow",), timeout_s=1800),
)
_SHARED_TAIL = (
    Selftest(("gup_test", "-ct", "-F", "0x1", "0", "19", "0x1000")),
    Selftest(("gup_longterm",), timeout_s=1200),
)


def _thp(khugepaged_format: str) -> tuple[Selftest, ...]:
    return (
        Selftest(("khugepaged",), timeout_s=1200, own_format=khugepaged_format),
        Selftest(("khugepaged", "-s", "2"), timeout_s=1200, own_format=khugepaged_format),
        # run_vmtests.sh's 20 s, on 256 MiB rather than half the guest: bounded in time
        Selftest(("transhuge-stress", "-d", "20", "256"), fast=True),
        # minutes under TCG on the debug kernel, most of them in pagecache cases that skip
        # without a large-folio filesystem: not in the fast subset
        Selftest(("split_huge_page_test",)),
    )


SELFTESTS = {
    "6.12": (
        Selftest(("hugepage-mmap",), fast=True),
        Selftest(("hugepage-shm",)),
        Selftest(("map_hugetlb",), fast=True),
        Selftest(("hugepage-mremap",)),
        Selftest(("hugepage-vmemmap",), fast=True),
        *_SHARED_HEAD,
        *_thp("khugepaged"),
        Selftest(("uffd-unit-tests",), timeout_s=1200, own_format="uffd"),
        Selftest(("gup_test", "-u"), fast=True),
        Selftest(("gup_test", "-a")),
        *_SHARED_TAIL,
    ),
    "7.3": (
        Selftest(("hugetlb-mmap",), fast=True),
        Selftest(("hugetlb-shm",)),
        Selftest(("hugetlb-mremap",)),
        *_SHARED_HEAD,
        *_thp(""),
        Selftest(("uffd-unit-tests",), timeout_s=1200),
        Selftest(("gup_test", "-u", "-n", "1"), fast=True),
        Selftest(("gup_test", "-u", "-n", "-1")),
        Selftest(("gup_test", "-a", "-n", "1")),
        Selftest(("gup_test", "-a", "-n", "-1")),
        *_SHARED_TAIL,
    ),
}


def of(linux: Linux) -> tuple[Selftest, ...]:
    """The selftests run on `linux`."""
    if linux.version not in SELFTESTS:
        raise MeminitError(f"the mm selftests are not ported to Linux {linux.version}: "
                           f"choose from {', '.join(SELFTESTS)}")
    return SELFTESTS[linux.version]


def fast(linux: Linux) -> tuple[Selftest, ...]:
    """The test command's subset: quick under TCG and passing on the series."""
    return tuple(t for t in of(linux) if t.fast)


def select(names: list[str] | None, linux: Linux = kernels.DEFAULT) -> tuple[Selftest, ...]:
    """The selftests of `linux` whose program or full name is in `names` (all if None)."""
    tests = of(linux)
    if not names:
        return tests
    chosen = tuple(t for t in tests if t.name in names or t.binary in names)
    unknown = [n for n in names if not any(n in (t.name, t.binary) for t in tests)]
    if unknown:
        raise MeminitError(f"unknown selftest {', '.join(unknown)} on Linux {linux.version}: choose from "
                           f"{', '.join(sorted({t.binary for t in tests}))}")
    return chosen


def missing_programs(tests: tuple[Selftest, ...], tree: Path) -> list[str]:
    """The programs of `tests` whose source (PROGRAM.c) the tree's mm selftests lack."""
    return sorted({t.binary for t in tests if not (tree / SELFTEST_DIR / f"{t.binary}.c").exists()})


def build_selftests(tests: tuple[Selftest, ...], jobs: int, linux: Linux = kernels.DEFAULT) -> Path:
    """Build the programs from the kernel's pristine tree; returns the directory holding them."""
    deps.ensure(deps.KERNEL_BUILD)
    tree = source.prepare_trees(linux).base
    missing = missing_programs(tests, tree)
    if missing:
        raise MeminitError(f"Linux {linux.version}'s {SELFTEST_DIR} has no {', '.join(missing)} "
                           "(renamed or dropped there): the selftests are not ported to this kernel")
    build_dir = linux.build_root / BUILD_DIR_NAME
    build_dir.mkdir(parents=True, exist_ok=True)
    headers = build_dir / "headers"
    kernel = build.Kernel("selftests", tree, headers)
    build.run_make(kernel, ["make", "-C", str(tree), f"O={headers}", "headers_install"],
                   build_dir / "headers.log", "selftests: uapi headers")
    out = build_dir / "bin"
    out.mkdir(exist_ok=True)
    binaries = sorted({str(out / t.binary) for t in tests})
    print(f"meminit: building {len(binaries)} mm selftests from {tree.name} into {out}",
          file=sys.stderr, flush=True)
    build.run_make(kernel, ["make", "-C", str(tree / SELFTEST_DIR), f"-j{jobs}", f"OUTPUT={out}",
                            f"KHDR_INCLUDES=-isystem {headers / 'usr/include'}", f"EXTRA_CFLAGS={EXTRA_CFLAGS}",
                            *binaries],
                   build_dir / "build.log", "selftests: mm programs")
    return out


def guest_script(tests: tuple[Selftest, ...], bin_dir: Path, out_dir: Path, hugetlb_pages: int) -> str:
    """Reserve the pool, then run each program with its output and exit code in out_dir."""
    runs = "\n".join(f"run {t.slug} {t.timeout_s} {t.hugetlb_pages or hugetlb_pages} "
                     f"{shlex.join([str(bin_dir / t.binary), *t.argv[1:]])}"
                     for t in tests)
    return f"""set -u
out={shlex.quote(str(out_dir))}
# gup_longterm makes its "local tmpfile" in the working directory: a tmpfs (virtme-ng
# mounts one on /run), as on the host share ftruncate() of the unlinked file fails
mkdir -p /run/meminit-selftests
cd /run/meminit-selftests
echo 3 > /proc/sys/vm/drop_caches
echo {hugetlb_pages} > /proc/sys/vm/nr_hugepages
for pool in /sys/kernel/mm/hugepages/hugepages-*; do
    echo "${{pool##*-}}: $(cat "$pool/free_hugepages") free of $(cat "$pool/nr_hugepages")"
done > "$out/hugetlb.txt"
run() {{
    slug=$1 limit=$2 pages=$3
    shift 3
    echo "$pages" > /proc/sys/vm/nr_hugepages
    # as run_vmtests.sh does before each THP and hugetlb test: room for huge pages
    echo 3 > /proc/sys/vm/drop_caches
    echo 1 > /proc/sys/vm/compact_memory
    echo "meminit-selftest $slug" > /dev/kmsg
    start=$(date +%s.%N)
    timeout -k 10 "$limit" "$@" > "$out/$slug.log" 2>&1
    rc=$?
    echo "$rc $start $(date +%s.%N)" > "$out/$slug.exit"
}}
{runs}
"""


def collect(test: Selftest, out_dir: Path, kernel_src: Path) -> selftest_results.Outcome:
    exit_file, log = out_dir / f"{test.slug}.exit", out_dir / f"{test.slug}.log"
    if not exit_file.exists():
        return selftest_results.Outcome(test.name, "NOT RUN")
    code, start, end = exit_file.read_text().split()
    output = log.read_text(errors="replace") if log.exists() else ""
    return selftest_results.parse(test.name, test.own_format, int(code), float(end) - float(start), output,
                         kernel_src)


def run_kernel(kernel: build.Kernel, tests: tuple[Selftest, ...], bin_dir: Path, run_dir: Path,
               guest: vm.GuestRequest, hugetlb_pages: int, label: str = "") -> list[selftest_results.Outcome]:
    """Boot `kernel` once and run `tests` (output in run_dir/<variant><label>); raises
    only if the guest itself failed."""
    name = kernel.variant + label
    out_dir = run_dir / name
    out_dir.mkdir(parents=True, exist_ok=True)
    script = out_dir / "selftests.sh"
    script.write_text(guest_script(tests, bin_dir, out_dir, hugetlb_pages))
    spec = vm.BootSpec(image=kernel.image, kernel=kernel.variant, name=f"selftests-{name}",
                       script=f"bash {shlex.quote(str(script))}", memory_bytes=GUEST_MEMORY, cpus=guest.cpus,
                       append=[vm.SKIP_KUNIT, "hugepagesz=1G", f"hugepages={GIGANTIC_PAGES}"],
                       timeout_s=300 + sum(t.timeout_s + 20 for t in tests))
    vm.boot_script(spec, run_dir, guest.accel)
    return [collect(t, out_dir, kernel.src) for t in tests]


RECHECK = "-recheck"


@dataclass(frozen=True)
class SelftestsRequest:
    tests: tuple[Selftest, ...] = ()  # () runs every selftest of `linux`
    variants: tuple[str, ...] = ("base", "series")
    # its memory and timeout are its own: GUEST_MEMORY, and the programs' limits
    guest: vm.GuestRequest = field(default_factory=vm.GuestRequest)
    hugetlb_pages: int = HUGETLB_POOL_BYTES // HUGEPAGE_BYTES
    linux: Linux = kernels.DEFAULT

    @property
    def chosen(self) -> tuple[Selftest, ...]:
        return self.tests or of(self.linux)


def run(request: SelftestsRequest, jobs: int | None = None) -> tuple[Path, list[str]]:
    """Build, boot each kernel, print the table; returns the run directory and the losses."""
    deps.ensure(deps.GUEST)
    tests = request.chosen
    # the programs first: a kernel whose tree lacks one is refused before any kernel build
    bin_dir = build_selftests(tests, jobs or 2, request.linux)
    built = build.build_variants(list(request.variants), jobs=jobs, linux=request.linux)
    run_dir = results.new_run_dir("selftests")
    first = next(iter(built.values()))
    accel = vm.resolve_accel(request.guest.accel, first.image, run_dir, first.variant)
    guest = replace(request.guest, accel=accel)
    columns = {v: run_kernel(k, tests, bin_dir, run_dir, guest, request.hugetlb_pages)
               for v, k in built.items()}
    names = [t.name for t in tests]
    problems = selftest_results.judge(columns)
    table = selftest_results.render(columns)
    rechecked: dict[str, list[selftest_results.Outcome]] = {}
    flaky: list[str] = []
    if problems and set(columns) == {"base", "series"}:
        # a loss must repeat: the programs lost once run again on both kernels
        lost_names = {selftest_results.program_of(p, names) for p in problems}
        lost = tuple(t for t in tests if t.name in lost_names)
        print(f"meminit: rechecking on both kernels: {', '.join(t.name for t in lost)}",
              file=sys.stderr, flush=True)
        rechecked = {v: run_kernel(k, lost, bin_dir, run_dir, guest, request.hugetlb_pages, RECHECK)
                     for v, k in built.items()}
        again = selftest_results.judge(rechecked)
        flaky = selftest_results.recheck_verdict(problems, again, names)
        table += ("\n\nrecheck of what the series lost, on both kernels:\n" + selftest_results.render(rechecked)
                  + "".join(f"\nflaky: {selftest_results.flaky_line(name, problems, names)}" for name in flaky))
        problems = again
    for variant in columns:  # what the pool got: a short one makes hugetlb programs skip
        pool = (run_dir / variant / "hugetlb.txt").read_text().split("\n")
        table += f"\nhugetlb pools on {variant} before the first program: " + ", ".join(line for line in pool if line)
    (run_dir / "table.txt").write_text(table + "\n")
    results.write_json(run_dir, {
        "kind": "selftests", "accel": accel, "hugetlb_pages": request.hugetlb_pages,
        "kernels": {v: k.release for v, k in built.items()}, **source.provenance(request.linux),
        "results": selftest_results.as_json(columns), "recheck": selftest_results.as_json(rechecked),
        "flaky": flaky, "problems": problems,
    })
    print(table)
    print(f"results: {run_dir / 'result.json'}", file=sys.stderr)
    return run_dir, problems
