"""The cover letters of the mailed parts: each part's `cover` file (its subject, then its
text; the core's with the streaming rules' table put in from the recorded runs), and for
the core what the harness checks on every series it tests."""

from __future__ import annotations

import textwrap
from pathlib import Path

from meminit.bench import auto_replay, recorded_runs, stream_rules
from meminit.core import kernels
from meminit.guest import configs, ktap, selftests
from meminit.kernel import compile_checks, parts
from meminit.scenarios import soak
from meminit.core.errors import MeminitError
from meminit.core.kernels import Linux

RULE_TABLE = "@RULE_TABLE@"  # where a cover puts the streaming rules' table (bench/stream_rules.py)
BASE_RELEASE = "@BASE_RELEASE@"  # where it names the point release it is against (6.12.118)
WIDTH = 76


def how_tested(linux: Linux = kernels.DEFAULT) -> str:
    """What the harness checks on `linux`'s series, and which checks every CI run makes (its
    code and .ci/run, not a claim about one run)."""
    suites = ktap.required_suites(linux)
    kunit_targets = configs.TARGETS_BY_KERNEL[linux.version]
    compile_targets = compile_checks.COMPILE_TARGETS_BY_KERNEL[linux.version]
    targets = {grouped: "; ".join(f"{n} ({', '.join(t.suites)})" for n, t in kunit_targets.items()
                                  if t.in_kunit_group == grouped)
               for grouped in (True, False)}
    by_hand = [f"KUnit through kunit.py on {targets[False]}"] if targets[False] else []
    if compile_targets:
        by_hand.append(f"W=1 compiles of the touched files under {', '.join(compile_targets)}")
    items = [
        "Every CI run: the files each prefix touches compile with W=1 and no warning on an added "
        "line, the series with its topic and test hooks builds, every patch, the RFCs' too, is "
        "checkpatch --strict clean. By hand: every prefix builds in full, the RFCs' too.",
        f"Every CI run: KUnit ({', '.join(suites)}) booted in QEMU on a debug kernel: DEBUG_VM, "
        "PROVE_LOCKING, PREEMPT full, DEBUG_PAGE_REF, 2 NUMA nodes with the pmem on the node "
        "without CPUs, zone_device_memmap loaded as a module; a fast-path case that skips there "
        "fails the run. Before a submission: "
        f"booted again with preempt={linux.other_preempt}.",
        f"{'Every CI run' if linux.ci_kunit else 'Before a submission'}: KUnit through kunit.py "
        f"on {targets[True]}." + (f" By hand: {'; '.join(by_hand)}." if by_hand else ""),
        "Every CI run: struct pages hashed after fsdax map=dev rebinds in every mode (the "
        "default, and slow, template and streaming forced) and compared (before a submission under "
        f"preempt={linux.other_preempt} too, and with the RFCs on two threads and in auto).",
    ]
    if "soak" in linux.long_guests:
        items.append(f"Before a submission: a soak of {soak.SHORT_CYCLES} bind/unbind cycles per device type "
                     "(fsdax map=dev, devdax align=2M, device-private through test_hmm) with struct pages "
                     "hashed and compared, CPU hotplug, injected allocation failures and kmemleak; 100 by hand.")
    if "selftests" in linux.long_guests:
        items.append(f"Before a submission: {len(selftests.fast(linux))} of the kernel's mm selftests on the "
                     f"debug kernel. By hand: all {len(selftests.of(linux))} on base and series side by side.")
    return "\n".join(fill(item, initial_indent="- ", subsequent_indent="  ") for item in items)


def fill(text: str, initial_indent: str = "", subsequent_indent: str = "") -> str:
    """textwrap.fill at WIDTH that never breaks a word at its hyphen (device-private)."""
    return textwrap.fill(text, WIDTH, break_on_hyphens=False, initial_indent=initial_indent,
                         subsequent_indent=subsequent_indent)


def part_cover(folder: Path) -> tuple[str, str]:
    """The cover letter of a part mailed apart (an RFC, a topic): its folder's `cover`, whose
    first line is the subject and the rest the text."""
    cover = folder / "cover"
    if not cover.exists():
        raise MeminitError(f"{cover} is missing: a part mailed apart needs its cover letter "
                           "(first line the subject, then the text)")
    subject, _, text = cover.read_text().partition("\n")
    return subject.strip(), text.strip() + "\n"


def core_cover(linux: Linux, base_release: str) -> tuple[str, str]:
    """The core's cover letter: patches/VERSION/core/cover with RULE_TABLE replaced by the
    rules' table over every recorded run and BASE_RELEASE by `base_release`, the point
    release of the tree it is mailed from, then how the series is tested."""
    subject, text = part_cover(linux.patches / parts.CORE)
    if RULE_TABLE in text:
        text = text.replace(RULE_TABLE, stream_rules.cover_table(recorded_runs.recorded_runs(),
                                                                 auto_replay.Policy()))
    text = text.replace(BASE_RELEASE, base_release)
    return subject, text + "\nHow it is tested\n----------------\n\n" + how_tested(linux) + "\n"
