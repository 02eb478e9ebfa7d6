"""`meminit check-series`: every prefix of the series builds, every patch is checkpatch --strict
clean, and the lines the series adds compile without W=1 warnings.

Prefixes are built in work/linux itself, oldest first, with the debug kernel's config into
its build directory: each checkout changes only the files that differ, so every step is an
incremental, ccache-backed build, and the last one leaves the test command's kernel built.
A prefix that changes a widely included header (string.h, mm.h, highmem.h) rebuilds most
of the kernel, so a full check costs about one full build per header state; --touched-only
(CI) compiles only the touched files of the earlier prefixes and builds the last one fully.
A touched file compiles with W=1 at the first prefix that touches it and again wherever
its input changes (kbuild decides); olddefconfig runs where a prefix changes a Kconfig file.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from meminit.core import deps, kernels, proc
from meminit.kernel import parts, build, kconfig, source
from meminit.core.errors import MeminitError
from meminit.core.kernels import Linux

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
        # a test-only patch is never mailed: its new files need no MAINTAINERS entry
        ignore = ["--ignore", "FILE_PATH_CHANGES"] if patch.parent.name == parts.TEST_ONLY else []
        report = proc.run(["perl", "scripts/checkpatch.pl", "--strict", *ignore, str(patch)],
                          cwd=tree, env=env, check=False)
        status = "clean" if report.returncode == 0 else "NOT clean"
        print(f"meminit: checkpatch --strict {patch.name}: {status}", file=sys.stderr, flush=True)
        if report.returncode != 0:
            failures.append(f"{patch.name}:\n{report.stdout.strip()}")
    return failures


def touched_objects(tree: Path, rev_range: str) -> list[str]:
    """The objects of the C and assembler files that rev_range changes and that exist now."""
    changed = source.git(tree, "diff", "--name-only", rev_range).split()
    return sorted(p[:-2] + ".o" for p in changed
                  if p.endswith((".c", ".S")) and (tree / p).exists())


def kconfig_changed(tree: Path, old: str, new: str) -> bool:
    """Whether a Kconfig file (Kconfig, Kconfig.debug, ...) differs between two commits."""
    changed = source.git(tree, "diff", "--name-only", old, new).split()
    return any(Path(p).name.startswith("Kconfig") for p in changed)


_TWICE_REACHED = re.compile(r"^arch/[^/]+/lib/")


def w1_batches(objects: list[str], jobs: int) -> list[tuple[list[str], int]]:
    """The make calls (objects, jobs) that compile objects without racing kbuild against itself.

    arch/<arch>/lib/ is reached from the top Kbuild through ARCH_LIB, not through
    arch/<arch>/Kbuild, so for a single-object goal there kbuild compiles the object twice:
    once in the obj=arch/<arch> pass and once in obj=arch/<arch>/lib. Run in parallel, one
    compile's fixdep consumes the .d file the other's fixdep then fails to open. Those objects
    get a make of their own with one job, where the second, correct-flags compile comes last.
    """
    raced = [o for o in objects if _TWICE_REACHED.match(o)]
    rest = [o for o in objects if o not in raced]
    return [(batch, n) for batch, n in ((rest, jobs), (raced, 1)) if batch]


def checkpatch_parts(linux: Linux = kernels.DEFAULT) -> None:
    """That the stack linux.rfcs selects applies on base, and checkpatch --strict on every one
    of its patches, with the checkpatch of whatever stack the tree carries: the tree is not
    re-applied (a switch of RFC parts
    rewrites headers most of the kernel includes, and the debug kernel would be rebuilt)."""
    tree = linux.tree if linux.tree.exists() else source.prepare_trees(linux.with_rfcs(())).series
    patches = parts.stack_patches(linux.patches, linux.rfcs)
    # the stack applies (in a scratch worktree: the tree keeps what it has)
    source.applied_in_scratch(tree, patches)
    failures = checkpatch(tree, patches)
    if failures:
        raise MeminitError("checkpatch --strict failed:\n" + "\n".join(failures))


def check_series(jobs: int | None = None, touched_only: bool = False,
                 linux: Linux = kernels.DEFAULT) -> None:
    """Check every prefix of the series: checkpatch, then per prefix a W=1 compile of the files
    the series has touched so far (warnings on its added lines fail), and a full build of every
    prefix or, with touched_only, of the last one only."""
    trees = source.prepare_trees(linux)
    tree = trees.series
    patches = parts.stack_patches(linux.patches, linux.rfcs)
    if not patches:
        raise MeminitError(f"{linux.patches}'s parts hold no patch: nothing to check")
    failures = checkpatch(tree, patches)
    # The debug kernel: the test command's, so that the last prefix is already built,
    # and the config with the most checks compiled in (DEBUG_VM, lockdep, NUMA).
    kernel = build.kernel_for(CHECK_VARIANT, trees)
    kconfig.configure(kernel.src, kernel.out, kconfig.fragments_for(CHECK_VARIANT, linux))
    full_config = (kernel.out / ".config").read_text()
    head = source.git(tree, "rev-parse", "HEAD").strip()
    commits = source.git(tree, "rev-list", "--reverse", f"{source.BASE_TAG}..HEAD").split()
    warnings: list[str] = []
    compiled: set[str] = set()
    try:
        for index, commit in enumerate(commits, 1):
            subject = source.git(tree, "log", "-1", "--format=%s", commit).strip()
            source.git(tree, "checkout", "-q", "--detach", commit)
            what = f"prefix {index}/{len(commits)} ({subject})"
            # Start each prefix from the whole series' config: olddefconfig at an earlier
            # prefix drops the symbols it does not know yet, and they must come back with
            # the patch that adds them. Where the prefix changes no Kconfig file, olddefconfig
            # would give the previous prefix's config again.
            if index == 1 or kconfig_changed(tree, commits[index - 2], commit):
                kconfig.reconfigure(kernel.src, kernel.out, full_config)
            warnings += _w1_touched(kernel, commit, index, what, jobs, compiled)
            if not touched_only or index == len(commits):
                print(f"meminit: building {what}", file=sys.stderr, flush=True)
                build.run_make(kernel, build.make_command(kernel, jobs or 2, ["bzImage", "modules"]),
                               kernel.out / f"check-prefix-{index}.log", f"build {what}")
    finally:
        # The tree is back at the series' head; make the next build configure afresh.
        kconfig.forget_configuration(kernel.out)
        source.git(tree, "checkout", "-q", source.BRANCH)
        if source.git(tree, "rev-parse", "HEAD").strip() != head:
            raise MeminitError(f"{tree} did not return to {head}")
    if failures or warnings:
        raise MeminitError("series check failed:\n" + "\n".join(failures + warnings))
    built = "the last prefix builds" if touched_only else f"all {len(commits)} prefixes build"
    print(f"series check passed: {built}, the touched files of every prefix compile with W=1 "
          f"and no warning on an added line, {len(patches)} patches checkpatch --strict clean")


def _w1_touched(kernel: build.Kernel, commit: str, index: int, what: str,
                jobs: int | None, compiled: set[str]) -> list[str]:
    """Compile, with W=1, the files the series changed up to commit; its new warnings.

    `compiled` holds the objects an earlier prefix of this check compiled with W=1. Those
    are left to kbuild, which compiles an object again when its source, a header it
    includes, a config symbol it uses or its command line (W=1 is part of it) changed:
    an object it keeps is the one an earlier prefix compiled from the same input, whose
    warnings that prefix counted (the added lines of an unchanged file are unchanged too).
    An object new to this check is removed first, so that it compiles here even if an
    earlier check left it compiled with W=1 from the same input."""
    rev_range = f"{source.BASE_TAG}..{commit}"
    objects = touched_objects(kernel.src, rev_range)
    if not objects:
        return []
    for obj in objects:
        if obj not in compiled:
            (kernel.out / obj).unlink(missing_ok=True)
    log = kernel.out / f"check-prefix-{index}-w1.log"
    output = ""
    for batch, batch_jobs in w1_batches(objects, jobs or 2):
        build.run_make(kernel, build.make_command(kernel, batch_jobs, batch, ["W=1"]), log,
                       f"W=1 compile of {len(batch)} touched files, {what}")
        output += log.read_text()
    log.write_text(output)
    compiled.update(objects)
    recompiled = len(set(build.KBUILD_COMPILED.findall(output)) & set(objects))
    warnings = new_warnings(output, added_lines(kernel.src, rev_range))
    kept = "" if recompiled == len(objects) else \
        f" ({recompiled} compiled, the others' input unchanged since an earlier prefix)"
    print(f"meminit: {what}: W=1 on {', '.join(objects)}{kept}: {len(warnings)} warnings on added lines",
          file=sys.stderr, flush=True)
    return [f"{what}: {w}" for w in warnings]
