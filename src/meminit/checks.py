"""`meminit check-series`: every prefix of the series builds, every patch is checkpatch --strict
clean, and the lines the series adds compile without W=1 warnings.

Prefixes are built in work/linux itself, oldest first, with the debug kernel's config into
its build directory: each checkout changes only the files that differ, so every step is an
incremental, ccache-backed build, and the last one leaves the test command's kernel built.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

from meminit import build, deps, kconfig, source
from meminit.errors import MeminitError

CHECK_VARIANT = "debug"

_WARNING = re.compile(r"^(?P<path>[\w./-]+\.[ch]):(?P<line>\d+):\d+: warning: (?P<msg>.*)$")


def added_lines(tree: Path, rev_range: str) -> dict[str, set[int]]:
    """Per file, the line numbers (new side) that the commits of rev_range add."""
    diff = source.git(tree, "diff", "-U0", rev_range)
    lines: dict[str, set[int]] = {}
    current = None
    for text in diff.splitlines():
        if text.startswith("+++ "):
            current = text[6:] if text.startswith("+++ b/") else None
        elif text.startswith("@@") and current:
            m = re.match(r"@@ -\S+ \+(\d+)(?:,(\d+))? @@", text)
            if m:
                start, count = int(m.group(1)), int(m.group(2) or "1")
                lines.setdefault(current, set()).update(range(start, start + count))
    return lines


def new_warnings(build_output: str, added: dict[str, set[int]]) -> list[str]:
    """W=1 warnings that point at a line the series added."""
    found = []
    for text in build_output.splitlines():
        m = _WARNING.match(text.strip())
        if not m:
            continue
        # gcc names the file relative to the build dir or absolutely: match on the tail.
        for path, lines in added.items():
            if (m.group("path") == path or m.group("path").endswith("/" + path)) \
                    and int(m.group("line")) in lines:
                found.append(text.strip())
    return found


# checkpatch validates SPDX tags with scripts/spdxcheck.py, which imports ply and git.
CHECKPATCH_DEPS = {
    "python3-ply": "/usr/lib/python3/dist-packages/ply/__init__.py",
    "python3-git": "/usr/lib/python3/dist-packages/git/__init__.py",
}


def checkpatch(tree: Path, patches: list[Path]) -> list[str]:
    deps.ensure(CHECKPATCH_DEPS)
    # Debian's python3 has those modules; a python3 earlier in PATH (pyenv, a venv) may not.
    env = dict(os.environ, PATH=f"/usr/bin{os.pathsep}{os.environ.get('PATH', '')}")
    failures = []
    for patch in patches:
        proc = subprocess.run(["perl", "scripts/checkpatch.pl", "--strict", str(patch)],
                              cwd=tree, capture_output=True, text=True, env=env)
        status = "clean" if proc.returncode == 0 else "NOT clean"
        print(f"meminit: checkpatch --strict {patch.name}: {status}", file=sys.stderr, flush=True)
        if proc.returncode != 0:
            failures.append(f"{patch.name}:\n{proc.stdout.strip()}")
    return failures


def check_series(jobs: int | None = None) -> None:
    trees = source.prepare_trees()
    tree = trees.series
    patches = source.read_series()
    if not patches:
        raise MeminitError("patches/series is empty: nothing to check")
    failures = checkpatch(tree, patches)
    # The debug kernel: the test command's, so that the last prefix is already built,
    # and the config with the most checks compiled in (DEBUG_VM, lockdep, NUMA).
    kernel = build.kernel_for(CHECK_VARIANT, trees)
    kconfig.configure(kernel.src, kernel.out, kconfig.fragments_for(CHECK_VARIANT))
    head = source.git(tree, "rev-parse", "HEAD").strip()
    commits = source.git(tree, "rev-list", "--reverse", f"{source.BASE_TAG}..HEAD").split()
    try:
        for index, commit in enumerate(commits, 1):
            subject = source.git(tree, "log", "-1", "--format=%s", commit).strip()
            source.git(tree, "checkout", "-q", "--detach", commit)
            what = f"prefix {index}/{len(commits)} ({subject})"
            print(f"meminit: building {what}", file=sys.stderr, flush=True)
            build.run_make(kernel, build.make_command(kernel, jobs or 2, ["bzImage", "modules"]),
                           kernel.out / f"check-prefix-{index}.log", f"build {what}")
    finally:
        # Earlier prefixes lack the series' Kconfig symbols, so kbuild dropped them from
        # .config on the way: make the next build configure from the fragments again.
        kconfig.forget_configuration(kernel.out)
        source.git(tree, "checkout", "-q", source.BRANCH)
        if source.git(tree, "rev-parse", "HEAD").strip() != head:
            raise MeminitError(f"{tree} did not return to {head}")
    added = added_lines(tree, f"{source.BASE_TAG}..HEAD")
    objects = sorted(p[:-2] + ".o" for p in added if p.endswith(".c") and (tree / p).exists())
    warnings: list[str] = []
    if objects:
        for obj in objects:  # force a W=1 recompile of each touched file
            (kernel.out / obj).unlink(missing_ok=True)
        log = kernel.out / "check-w1.log"
        build.run_make(kernel, build.make_command(kernel, jobs or 2, objects, ["W=1"]), log,
                       f"W=1 build of {len(objects)} touched files")
        warnings = new_warnings(log.read_text(), added)
        print(f"meminit: W=1 on {', '.join(objects)}: {len(warnings)} warnings on added lines",
              file=sys.stderr)
    if failures or warnings:
        raise MeminitError("series check failed:\n" + "\n".join(failures + warnings))
    print(f"series check passed: {len(commits)} prefixes build, {len(patches)} patches "
          f"checkpatch --strict clean, no W=1 warnings on added lines")


def _cmd_check_series(args: argparse.Namespace) -> int:
    check_series(args.jobs)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check-series", help="build every prefix of the series, checkpatch, W=1")
    p.add_argument("-j", "--jobs", type=int, help="parallel jobs (default: 2)")
    p.set_defaults(func=_cmd_check_series)
