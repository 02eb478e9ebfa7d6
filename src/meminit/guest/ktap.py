"""KUnit results from a boot log, parsed by the kernel's own tools/testing/kunit/kunit.py."""

from __future__ import annotations

import json
import re
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from meminit.core import kernels, paths, proc
from meminit.core.errors import MeminitError
from meminit.core.kernels import Linux

REQUIRED_SUITES_FILE = paths.CONFIG_DIR / "kunit-suites.txt"
# The start of a top-level KTAP document (a suite's own is indented): one at boot for the
# built-in suites, one per KUnit module loaded later. kunit.py parse reads the first only.
DOCUMENT_START = re.compile(r"^(?:\[\s*\d+\.\d+\] )?KTAP version \d+\r?$", re.M)
# Guest shell: load every KUnit module the kernel built (modules.order names them: a test
# module is named *kunit*, or, as list-test, depends on kunit.ko where KUnit is a module);
# each runs its suites as it loads and prints its own KTAP document to the console. A
# module that does not load is said on the console, and its suites then did not run.
LOAD_KUNIT_MODULES = (
    "for m in $(sed -n 's|.*/\\([^/]*\\)\\.k\\?o$|\\1|p' /lib/modules/$(uname -r)/modules.order); do\n"
    "    case \"$m\" in *kunit*) ;; *) modinfo -F depends \"$m\" | grep -qw kunit || continue ;; esac\n"
    "    modprobe \"$m\" || echo \"meminit: modprobe $m failed\"\n"
    "done\n")


@dataclass(frozen=True)
class KunitCase:
    suite: str
    name: str
    status: str  # kunit_json statuses: PASS, FAIL, SKIP, ERROR


@dataclass(frozen=True)
class KunitReport:
    ok: bool
    cases: list[KunitCase]
    summary: str

    def failed(self) -> list[KunitCase]:
        return [c for c in self.cases if c.status not in ("PASS", "SKIP")]

    def suites(self) -> set[str]:
        return {c.suite for c in self.cases}

    def tally(self) -> str:
        """'P passed, F failed, S skipped', the skipped cases named."""
        skipped = [f"{c.suite}.{c.name}" for c in self.cases if c.status == "SKIP"]
        return (f"{sum(c.status == 'PASS' for c in self.cases)} passed, {len(self.failed())} failed, "
                f"{len(skipped)} skipped" + (f" ({', '.join(skipped)})" if skipped else ""))


def required_suites(linux: Linux = kernels.DEFAULT) -> list[str]:
    """The suites the booted series kernel must run: config/kunit-suites.txt and the
    kernel's own config/VERSION/kunit-suites.txt, if any."""
    own = linux.own_config(REQUIRED_SUITES_FILE.name)
    files = [REQUIRED_SUITES_FILE, *([own] if own.exists() else [])]
    lines = (line.strip() for f in files for line in f.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def gate(report: KunitReport, suites: Iterable[str], *, must_pass: Iterable[str] = (),
         skips_allowed: bool = True) -> list[str]:
    """Why a KUnit run does not count as passed; empty when it does.

    A required suite that did not run, a case that failed or crashed, kunit.py's own
    verdict, a case named in must_pass that did not pass (a target that exists to run
    it), and, unless skips_allowed, a skipped case of a required suite: a boot that
    offers everything its suites need must run every case, so a skip there means a
    fast path went untested.
    """
    suites = list(suites)
    ran = report.suites()
    problems = [f"suite {s} did not run" for s in suites if s not in ran]
    problems += [f"{c.suite}.{c.name} {c.status}" for c in report.failed()]
    if not report.ok and not report.failed():
        problems.append("kunit.py parse found the run broken (a crash or a truncated log)")
    status = {c.name: c.status for c in report.cases}
    problems += [f"{name} {status.get(name, 'did not run')}, and this target exists to run it"
                 for name in must_pass if status.get(name) != "PASS"]
    if not skips_allowed:
        problems += [f"{c.suite}.{c.name} SKIP" for c in report.cases
                     if c.status == "SKIP" and c.suite in suites]
    return problems


def _overall(statuses: set[str]) -> str:
    """A parameterised case's status from its parameters' (kunit.py's JSON gives a group
    none): failed or crashed if one did, skipped if one was (or none ran), else passed."""
    if "FAIL" in statuses or "ERROR" in statuses:
        return "FAIL" if "FAIL" in statuses else "ERROR"
    return "SKIP" if "SKIP" in statuses or not statuses else "PASS"


def _walk(node: dict, suite: str, out: list[KunitCase], depth: int = 0) -> None:
    """The cases under a kunit.py JSON group: the root's groups are suites, a suite's groups
    are parameterised cases, each listed by its parameters and then as a case of its suite."""
    for case in node.get("test_cases", []):
        out.append(KunitCase(suite=suite, name=case["name"], status=case["status"]))
    for sub in node.get("sub_groups", []):
        name = sub.get("name", suite)
        first = len(out)
        _walk(sub, name, out, depth + 1)
        if depth:
            out.append(KunitCase(suite=suite, name=name, status=_overall({c.status for c in out[first:]})))


def documents(log_text: str) -> list[str]:
    """The log cut before each top-level KTAP document but the first (what precedes the
    first stays with it)."""
    starts = [m.start() for m in DOCUMENT_START.finditer(log_text)][1:]
    bounds = [0, *starts, len(log_text)]
    return [log_text[a:b] for a, b in zip(bounds, bounds[1:])]


def parse(log_text: str, kernel_src: Path) -> KunitReport:
    """Run `kunit.py parse --json` on each KTAP document of a kernel log (the boot's and
    one per KUnit module loaded); kunit.py finds the KTAP lines itself."""
    tool = kernel_src / "tools/testing/kunit/kunit.py"
    if not tool.exists():
        raise MeminitError(f"{tool} not found: is {kernel_src} a kernel tree?")
    reports = [_parse_document(text, tool) for text in documents(log_text)]
    return KunitReport(ok=all(r.ok for r in reports), cases=[c for r in reports for c in r.cases],
                       summary="\n".join(r.summary for r in reports))


def _parse_document(log_text: str, tool: Path) -> KunitReport:
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "boot.log"
        js = Path(tmp) / "kunit.json"
        log.write_text(log_text)
        parsed = proc.run([sys.executable, str(tool), "parse", f"--json={js}", str(log)], check=False)
        summary = parsed.stdout.strip()
        if not js.exists():
            raise MeminitError(f"kunit.py parse produced no JSON:\n{parsed.stderr.strip()}")
        data = json.loads(js.read_text())
    cases: list[KunitCase] = []
    _walk(data, data.get("name", "?"), cases)
    ok = parsed.returncode == 0 and all(c.status in ("PASS", "SKIP") for c in cases)
    return KunitReport(ok=ok, cases=cases, summary=summary)
