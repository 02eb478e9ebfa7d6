"""What the kernel logs about memmap init, and the debugfs files a guest drives it with.

The series prints one `memmap_init_zone_device initialised ...` line per range (patch
10 adds one line per thread before it); a guest writes a marker to /dev/kmsg before
each bind, so every line is attributed to the bind that caused it. The scenarios and
the soak read these lines; memmap_hash_function() is the bash both use to hash a
bound range's struct pages through the series' TEST ONLY debugfs file.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, replace
from typing import TypeVar

MODE_FILE = "/sys/kernel/debug/zone_device/memmap_init_mode"
HASH_FILE = "/sys/kernel/debug/zone_device/memmap_hash"
THREADS_FILE = "/sys/kernel/debug/zone_device/memmap_init_threads"
MARK = "meminit-mark"

INIT_LINE = re.compile(
    r"memmap_init_zone_device initialised (?P<pages>\d+) pages in (?P<ms>\d+)ms"
    r"(?: \((?P<ns>\d+) ns, mode (?P<mode>[\w-]+)(?:, threads (?P<threads>\d+))?\))?")
# patch 10: one line per thread of a range, before the range's INIT_LINE
THREAD_LINE = re.compile(r"memmap_init_run: pfn \S+ node (?P<node>-?\d+), thread \d+: (?P<chunks>\d+) chunks, "
                         r"started on CPU (?P<cpu>-?\d+)(?P<moved>, a later chunk on another)?")
MARK_LINE = re.compile(MARK + r" (?P<phase>first|rebind) (?P<variant>[\w-]+) (?P<iteration>\d+)")
HASH_LINE = re.compile(MARK + r"-hash (?P<variant>[\w-]+) (?P<iteration>\d+) (?P<hash>\S+)")


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
    marked = parse_inits(dmesg, MARK_LINE,
                         lambda m: (m.group("phase"), m.group("variant"), int(m.group("iteration"))))
    return [InitSample(**asdict(seen), phase=k[0], variant=k[1], iteration=k[2])
            for k, seen in marked.items() if seen.ranges]


def parse_hashes(text: str) -> dict[str, list[str]]:
    hashes: dict[str, list[str]] = {}
    for m in HASH_LINE.finditer(text):
        hashes.setdefault(m.group("variant"), []).append(m.group("hash"))
    return hashes


def hash_mismatch(hashes: dict[str, list[str]]) -> str | None:
    """None when every variant's memmap hashed the same, else a description of the difference."""
    distinct = {h for values in hashes.values() for h in values}
    if len(distinct) <= 1:
        return None
    return "; ".join(f"{v}: {' '.join(sorted(set(hs)))}" for v, hs in hashes.items())


def memmap_hash_function() -> str:
    """Bash: memmap_hash_of SCENARIO [NAME...] prints the hash of the bound range's struct pages.

    One 16-hex-digit hash per range (device-private may map several), from the TEST ONLY
    memmap_hash debugfs file (patch 16); returns 5, saying why on stderr, when it cannot.
    A pmem range is the first of the /proc/iomem NAMEs that exists (default: the guest's
    dax0.0, then namespace0.0).
    """
    return f"""memmap_hash_of() {{
    local scenario=$1 ranges="" range name start end pages hash out=""
    shift
    # devdax maps the dax range (inside the namespace), fsdax the namespace itself
    [ $# -gt 0 ] || set -- dax0.0 namespace0.0
    case "$scenario" in
    device-private) ranges=$(grep -F hmm_dmirror /proc/iomem) ;;
    *) for name; do
        ranges=$(awk -v n="$name" -F' : ' '$2 == n {{print; exit}}' /proc/iomem)
        [ -z "$ranges" ] || break
    done ;;
    esac
    [ -n "$ranges" ] || {{ echo "no range of $scenario ($*) in /proc/iomem" >&2; cat /proc/iomem >&2; return 5; }}
    for range in $(echo "$ranges" | tr -d ' ' | cut -d: -f1); do
        start=$(( 0x${{range%-*}} >> 12 ))
        end=$(( (0x${{range#*-}} + 1) >> 12 ))
        if [ "$scenario" != device-private ]; then
            # with an altmap the first PFNs hold the memmap and are not initialised
            pages=$(dmesg | grep -o 'memmap_init_zone_device initialised [0-9]* pages' | tail -1 | awk '{{print $3}}')
            [ -n "$pages" ] || {{ echo "no timing line for $scenario in dmesg" >&2; return 5; }}
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
