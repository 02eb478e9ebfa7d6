"""Fork's maple-tree copy on the host (issue 8): the kernel's own userspace harness
(tools/testing/radix-tree, ``maple`` with BENCH_FORK) built from a private export of the
pristine 6.12 source, and our comparison (bench/fork/maple_dup_vs_insert.c) of
``__mt_dup()`` against rebuilding the tree entry by entry: building, running, reading,
tables and the plot. `meminit maple-bench` (maple_bench.py) drives them.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import statistics
import sys
import sysconfig
import time
from pathlib import Path

from meminit.core import deps, kernels, paths, plotting, proc
from meminit.kernel import source
from meminit.core.errors import MeminitError
from meminit.bench.forkbench import FORK_BUILD, FORK_DIR, FORKBENCH_DEPS
from meminit.core.stats import median_range, spread_pct
from meminit.core.tables import fixed_point, render_markdown

MAPLE_SRC = paths.WORK / "maple-src"
EXPORT_STAMP = ".meminit-export"
TARBALL = Path("/usr/src/linux-source-6.12.tar.xz")
TARBALL_TOP = "linux-source-6.12"
# What the userspace harness needs from the kernel source.
EXPORT_PATHS = ("tools/testing/radix-tree", "tools/testing/shared", "tools/include",
                "tools/arch", "tools/lib", "lib", "include", "arch/x86/include")
_MULTIARCH = sysconfig.get_config_var("MULTIARCH") or f"{platform.machine()}-linux-gnu"
MAPLE_DEPS = {
    **FORKBENCH_DEPS,
    "liburcu-dev": f"/usr/include/{_MULTIARCH}/urcu.h",
    "git": "/usr/bin/git",
    "xz-utils": "/usr/bin/xz",
}

METHODS = ("mt_dup", "bulk_insert", "store_each")
METHOD_HELP = {
    "mt_dup": "__mt_dup() + in-place store of each new VMA (6.8+ dup_mmap)",
    "bulk_insert": "mas_expected_entries() + mas_store() per range (<= 6.7 dup_mmap)",
    "store_each": "mas_store_gfp() per range, no size hint",
}


def _kernel_base_rev() -> str | None:
    if not (kernels.LTS.tree / ".git").exists() or shutil.which("git") is None:
        return None
    return source.git(kernels.LTS.tree, "rev-parse", "--verify", "-q", "base^{commit}",
                      check=False).strip() or None


def export_maple_source() -> Path:
    """Private copy of the pristine 6.12 source for the userspace harness.

    From the harness's kernel tree (tag ``base``) with git archive, so the tree
    itself is never built in or touched; without that tree (fresh clone), from
    Debian's linux-source-6.12 tarball.
    """
    rev = _kernel_base_rev()
    if rev:
        origin = f"git:{rev}"
    else:
        deps.ensure({"linux-source-6.12": str(TARBALL), "xz-utils": "/usr/bin/xz"})
        origin = f"tarball:{deps.package_version('linux-source-6.12')}"
    stamp = MAPLE_SRC / EXPORT_STAMP
    want = f"{origin}\n{' '.join(EXPORT_PATHS)}\n"
    if stamp.exists() and stamp.read_text() == want \
            and (MAPLE_SRC / "lib" / "maple_tree.c").exists():
        return MAPLE_SRC
    if MAPLE_SRC.exists():
        shutil.rmtree(MAPLE_SRC)
    MAPLE_SRC.mkdir(parents=True)
    print(f"meminit: exporting the 6.12 source ({origin}) to {MAPLE_SRC}", file=sys.stderr,
          flush=True)
    if rev:
        archive = MAPLE_SRC / "export.tar"
        proc.run(["git", "-C", str(kernels.LTS.tree), "archive", f"--output={archive}", rev,
                  *EXPORT_PATHS], f"git archive of {kernels.LTS.tree}")
        proc.run(["tar", "-xf", str(archive), "-C", str(MAPLE_SRC)], f"unpacking {archive}")
        archive.unlink()
    else:
        proc.run(["tar", "-xJf", str(TARBALL), "-C", str(MAPLE_SRC), "--strip-components=1",
              *(f"{TARBALL_TOP}/{p}" for p in EXPORT_PATHS)],
             f"extracting the harness sources from {TARBALL}")
    if not (MAPLE_SRC / "tools" / "testing" / "radix-tree" / "maple.c").exists():
        raise MeminitError(f"{MAPLE_SRC} has no tools/testing/radix-tree/maple.c after export")
    stamp.write_text(want)
    return MAPLE_SRC


def build_maple() -> tuple[Path, Path]:
    """Build the harness's ``maple`` (BENCH_FORK, -O2) and our comparison against it."""
    deps.ensure(MAPLE_DEPS)
    src = export_maple_source()
    proc.run(["make", "-s", "-C", str(FORK_DIR), "maple-harness", "maple-dup",
          f"BUILD={FORK_BUILD}", f"MAPLE_SRC={src}", f"-j{os.cpu_count() or 1}"],
         "building the maple-tree harness and maple_dup_vs_insert", timeout=1200)
    harness = src / "tools" / "testing" / "radix-tree" / "maple"
    ours = FORK_BUILD / "maple_dup_vs_insert"
    for binary in (harness, ours):
        if not os.access(binary, os.X_OK):
            raise MeminitError(f"build produced no executable {binary}")
    return harness, ours


def harness_bench_params(src: Path | None = None) -> dict:
    """nr_entries / nr_fork of bench_forking() in the exported lib/test_maple_tree.c."""
    text = ((src or MAPLE_SRC) / "lib" / "test_maple_tree.c").read_text()
    body = text[text.find("bench_forking(void)"):]
    entries = re.search(r"nr_entries\s*=\s*(\d+)", body)
    forks = re.search(r"nr_fork\s*=\s*(\d+)", body)
    if not (entries and forks):
        raise MeminitError("cannot find nr_entries/nr_fork in bench_forking()")
    # the loop stores i = 0 .. nr_entries inclusive
    return {"entries": int(entries.group(1)) + 1, "dups": int(forks.group(1))}


def run_harness_bench(binary: Path) -> dict:
    """One run of the harness's BENCH_FORK: __mt_dup + rewrite + mt_validate per dup."""
    start = time.monotonic()
    done = proc.run([str(binary)], "the maple harness (BENCH_FORK)", cwd=binary.parent, timeout=600)
    seconds = time.monotonic() - start
    match = re.search(r"maple_tree: (\d+) of (\d+) tests passed", done.stdout)
    if not match:
        raise MeminitError("the maple harness printed no 'tests passed' line")
    passed, run = int(match.group(1)), int(match.group(2))
    if passed != run:
        raise MeminitError(f"the maple harness: only {passed} of {run} checks passed")
    return {"seconds": seconds, "checks": run}


def parse_maple_dup(output: str) -> list[dict]:
    """Rows of maple_dup_vs_insert; fail on an error row or an unverified copy."""
    rows = []
    for raw in output.splitlines():
        start = raw.find("{")
        if start < 0:
            continue
        try:
            row = json.loads(raw[start:])
        except json.JSONDecodeError:
            continue
        if "error" in row:
            raise MeminitError(f"maple_dup_vs_insert: {row['error']} "
                               f"(N={row.get('n')}, {row.get('method')})")
        if row.get("kind") != "maple_copy":
            continue
        if row.get("method") not in METHODS or not row.get("verified"):
            raise MeminitError(f"maple_dup_vs_insert: unexpected row {row}")
        rows.append(row)
    if not rows:
        raise MeminitError("maple_dup_vs_insert: no result line in the output")
    return rows


def summarize_maple(rows: list[dict]) -> list[dict]:
    """Per N and method: median/min/max µs per copy; per N: ratios to mt_dup per repetition."""
    cells: dict[tuple[int, str], list[dict]] = {}
    for row in rows:
        cells.setdefault((int(row["n"]), row["method"]), []).append(row)
    out = []
    for n in sorted({k[0] for k in cells}):
        entry: dict = {"n": n}
        for m in METHODS:
            if (n, m) not in cells:
                continue
            us = [float(r["us_per_copy"]) for r in cells[(n, m)]]
            med, lo, hi = median_range(us)
            entry[m] = {"reps": len(us), "us_median": med, "us_min": lo, "us_max": hi,
                        "spread_pct": spread_pct(us), "nodes": cells[(n, m)][0].get("nodes")}
            only = [float(r["us_mt_dup_only"]) for r in cells[(n, m)] if "us_mt_dup_only" in r]
            if only:
                entry[m]["us_mt_dup_only_median"] = statistics.median(only)
        if "mt_dup" in entry:
            dup_by_rep = {r["rep"]: float(r["us_per_copy"]) for r in cells[(n, "mt_dup")]}
            for m in METHODS[1:]:
                if (n, m) not in cells:
                    continue
                ratios = [float(r["us_per_copy"]) / dup_by_rep[r["rep"]]
                          for r in cells[(n, m)] if r["rep"] in dup_by_rep]
                if ratios:
                    med, lo, hi = median_range(ratios)
                    entry[f"ratio_{m}"] = {"median": med, "min": lo, "max": hi,
                                           "reps": len(ratios)}
        out.append(entry)
    return out


def maple_table(rows: list[dict]) -> str:
    """Markdown table: µs per copy of each method and the ratio of re-inserting to __mt_dup()."""
    summary = summarize_maple(rows)
    header = ["N", "reps"]
    for m in METHODS:
        header.append(f"{m} µs")
    header += ["__mt_dup only µs", "bulk_insert / mt_dup", "store_each / mt_dup"]
    lines = []
    for s in summary:
        reps = max((s[m]["reps"] for m in METHODS if m in s), default=0)
        line = [str(s["n"]), str(reps)]
        for m in METHODS:
            c = s.get(m)
            line.append(f"{fixed_point(c['us_median'])} ({fixed_point(c['us_min'])}–{fixed_point(c['us_max'])})"
                        if c else "–")
        only = s.get("mt_dup", {}).get("us_mt_dup_only_median")
        line.append(fixed_point(only) if only is not None else "–")
        for m in METHODS[1:]:
            r = s.get(f"ratio_{m}")
            line.append(f"{r['median']:.2f}× ({r['min']:.2f}–{r['max']:.2f})" if r else "–")
        lines.append(line)
    return render_markdown(header, lines)


def _errorbar_by_n(ax, summary: list[dict], key: str, prefix: str, label: str) -> None:
    """Median with a min–max bar per N of summary[i][key][prefix + median/min/max]."""
    pts = [(s["n"], s[key]) for s in summary if key in s]
    if not pts:
        return
    med = [p[1][prefix + "median"] for p in pts]
    err = [[m - p[1][prefix + "min"] for m, p in zip(med, pts)],
           [p[1][prefix + "max"] - m for m, p in zip(med, pts)]]
    ax.errorbar([p[0] for p in pts], med, yerr=err, marker="o", capsize=3, label=label)


def _style_by_n(ax, ylabel: str, title: str) -> None:
    ax.set_xscale("log")
    ax.set_xlabel("ranges (VMAs) in the tree")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)


def plot(result: dict, out: Path) -> None:
    """PNG: µs per copy and ratio per N; host fork rate per N when measured."""
    plt = plotting.pyplot()
    summary = result["maple_copy"]["summary"]
    fork_summary = (result.get("forkbench_host") or {}).get("summary") or []
    ncols = 3 if fork_summary else 2
    fig, axes = plt.subplots(1, ncols, figsize=(5.2 * ncols, 4.4))
    ns = [s["n"] for s in summary]

    ax = axes[0]
    for m in METHODS:
        _errorbar_by_n(ax, summary, m, "us_", m)
    ax.set_yscale("log")
    _style_by_n(ax, "µs per copy (median, min–max)", "Copying a maple tree")

    ax = axes[1]
    for m in METHODS[1:]:
        _errorbar_by_n(ax, summary, f"ratio_{m}", "", f"{m} / mt_dup")
    ax.axhline(1.0, color="grey", lw=0.8)
    _style_by_n(ax, "time ratio (>1: __mt_dup faster)", "Re-inserting vs __mt_dup()")

    if fork_summary:
        ax = axes[2]
        x = [s["vmas"] for s in fork_summary]
        y = [s["forks_per_sec_median"] for s in fork_summary]
        err = [[s["forks_per_sec_median"] - s["forks_per_sec_min"] for s in fork_summary],
               [s["forks_per_sec_max"] - s["forks_per_sec_median"] for s in fork_summary]]
        ax.errorbar(x, y, yerr=err, marker="o", capsize=3)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("extra VMAs in the parent")
        ax.set_ylabel("forks/s (median, min–max)")
        ax.set_title(f"fork + exit + wait, host {result['host']['kernel']}")
        ax.grid(True, which="both", alpha=0.3)

    fig.suptitle(f"maple-bench {result['timestamp']}  (load at start: "
                 f"{result['loadavg']['start'].split()[0]}, {result['host']['cpus']} CPUs; "
                 f"N = {', '.join(map(str, ns))})", fontsize=9)
    plotting.save(fig, out, dpi=110)
