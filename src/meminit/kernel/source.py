"""Kernel source and the series: a Debian linux-source package as a git tree, patches/ applied on top.

Layout under work/, per kernel (linux.Linux: 6.12's names below, 7.3's carry "-7.3"):
  linux/       git repo; tag `base` is the pristine Debian source, branch `series`
               carries one commit per file in patches/VERSION/ (edit here, then `meminit export`)
  linux-base/  a detached worktree at `base`, so base and series build side by side
               without touching each other's files (and mtimes)
  sources/VERSION/  a source package fetched from another Debian suite, unpacked (7.3)
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

from meminit.core import deps, kernels, paths, proc
from meminit.core.errors import MeminitError
from meminit.core.kernels import Linux

BRANCH = "series"
BASE_TAG = "base"
GIT_IDENTITY = ["-c", "user.name=meminit", "-c", "user.email=meminit@localhost"]


@dataclass(frozen=True)
class Trees:
    series: Path
    base: Path
    linux: Linux = kernels.DEFAULT


def git(tree: Path, *args: str, check: bool = True, env: dict[str, str] | None = None) -> str:
    """git in `tree`; its stdout."""
    done = proc.run(["git", "-C", str(tree), *GIT_IDENTITY, *args], check=False, env=env)
    if check and done.returncode != 0:
        raise MeminitError(f"git {' '.join(args)} failed in {tree}:\n{done.stderr.strip()}")
    return done.stdout


def read_series(patch_dir: Path = kernels.DEFAULT.patches) -> list[Path]:
    """The patches in the order of patch_dir/series (blank lines and # comments ignored)."""
    series_file = patch_dir / "series"
    if not series_file.exists():
        return []
    names = []
    for line in series_file.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            names.append(line)
    missing = [n for n in names if not (patch_dir / n).is_file()]
    if missing:
        raise MeminitError(f"{series_file} names files that do not exist: {', '.join(missing)}")
    listed = set(names)
    stray = sorted(p.name for p in patch_dir.glob("*.patch") if p.name not in listed)
    if stray:
        raise MeminitError(f"{patch_dir} has files not listed in its series: {', '.join(stray)}")
    return [patch_dir / n for n in names]


def source_version(linux: Linux = kernels.DEFAULT) -> str:
    """The Debian version of the kernel's source package, installed or fetched first if need be."""
    deps.ensure(deps.KERNEL_BUILD)
    if not linux.suite:
        deps.ensure({linux.source_package: str(linux.tarball)})
        return deps.package_version(linux.source_package)
    stamp = linux.fetched / "version"
    if not (stamp.exists() and linux.tarball.exists()):
        _fetch(linux)
    return stamp.read_text().strip()


def fetch_unpacked(package: str, linux: Linux, root: Path, wanted: Path) -> str:
    """A package of the kernel's Debian suite fetched (deps.fetch_deb) and unpacked into
    `root`, emptied first; fails unless it holds `wanted`. Returns the package's version."""
    deb = deps.fetch_deb(package, linux.suite, paths.WORK / "apt" / linux.suite, paths.WORK / "apt" / "debs")
    version = deps.deb_field(deb, "Version")
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    print(f"meminit: unpacking {deb.name} into {root}", file=sys.stderr, flush=True)
    proc.run(["dpkg-deb", "-x", str(deb), str(root)], f"dpkg-deb -x {deb.name}")
    if not wanted.exists():
        raise MeminitError(f"{deb.name} has no {wanted.relative_to(root)}")
    deb.unlink()
    return version


def _fetch(linux: Linux) -> None:
    """The source package from the kernel's Debian suite, unpacked into work/sources/VERSION."""
    version = fetch_unpacked(linux.source_package, linux, linux.fetched, linux.tarball)
    (linux.fetched / "version").write_text(version + "\n")


def _unpack(version: str, tree: Path, linux: Linux = kernels.DEFAULT) -> None:
    tmp = tree.with_name(tree.name + ".unpacking")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    print(f"meminit: unpacking {linux.tarball} ({linux.source_package} {version})", file=sys.stderr, flush=True)
    with tarfile.open(linux.tarball) as tar:
        top = tar.next()
        tar.extractall(tmp, filter="fully_trusted")
    inner = tmp / (top.name.split("/", 1)[0] if top else "")
    print("meminit: recording the pristine source as the `base` commit", file=sys.stderr, flush=True)
    git(inner, "init", "-q", "-b", BRANCH)
    # Debian's top-level .gitignore ends with "/*": force-add so the base commit is the whole tarball.
    git(inner, "add", "-A", "-f", ".")
    # A fixed date: the same package then gives the same base commit on every machine, so a
    # mailed series' base-commit names a commit anyone can recreate with `meminit tree`.
    # No user or system git config either: commit.gpgSign and the like would change it.
    dated = dict(os.environ, GIT_AUTHOR_DATE=linux.base_date, GIT_COMMITTER_DATE=linux.base_date,
                 GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")
    git(inner, "commit", "-q", "-m", f"base: Debian {linux.source_package} {version}", env=dated)
    git(inner, "tag", BASE_TAG)
    git(inner, "config", "meminit.sourceversion", version)
    if tree.exists():
        shutil.rmtree(tree)
    inner.rename(tree)
    shutil.rmtree(tmp)


def unreproducible_base(tree: Path, linux: Linux = kernels.DEFAULT) -> str | None:
    """Why the tree's base commit is not the one `meminit tree` makes today, or None."""
    date = git(tree, "log", "-1", "--format=%cI", BASE_TAG).strip()
    if date.replace("+00:00", "Z") != linux.base_date:
        return (f"{tree}'s {BASE_TAG} commit is dated {date}, not {linux.base_date} "
                "(made before its date was fixed)")
    return None


def _applied_marker(tree: Path) -> Path:
    return tree / ".git" / "meminit-applied"


def _record_applied(tree: Path) -> None:
    _applied_marker(tree).write_text(git(tree, "rev-parse", "HEAD").strip() + "\n")


def _tree_has_own_work(tree: Path) -> str | None:
    """Why the tree must not be reset, or None when it only holds what meminit put there."""
    if git(tree, "status", "--porcelain", "--untracked-files=no").strip():
        return "it has uncommitted changes"
    marker = _applied_marker(tree)
    head = git(tree, "rev-parse", "HEAD").strip()
    if marker.exists() and marker.read_text().strip() == head:
        return None
    if head == git(tree, "rev-parse", BASE_TAG).strip():
        return None
    return "it has commits that were never exported to patches/ (run `meminit export`)"


def patch_ids(tree: Path, rev_range: str) -> list[str]:
    diff = git(tree, "log", "--reverse", "-p", "--format=commit %H", rev_range)
    ids = proc.run(["git", "patch-id", "--stable"], input=diff).stdout
    return [line.split()[0] for line in ids.splitlines()]


def file_patch_ids(patches: list[Path]) -> list[str]:
    ids = []
    for patch in patches:
        found = proc.run(["git", "patch-id", "--stable"], input=patch.read_text()).stdout
        ids.append(found.split()[0] if found else "")
    return ids


def rejected_hunk(patch_text: str, path: str, line: int) -> str:
    """The hunk of `path` in a patch whose old-side range starts at `line` (git apply's report)."""
    hunk: list[str] = []
    current_file = None
    capturing = False
    for text in patch_text.splitlines():
        if text.startswith("diff --git "):
            if capturing:
                break
            current_file = text.split(" b/", 1)[-1]
            continue
        if text.startswith("@@"):
            if capturing:
                break
            m = re.match(r"@@ -(\d+)", text)
            capturing = current_file == path and m is not None and int(m.group(1)) == line
        if capturing:
            hunk.append(text)
    return "\n".join(hunk)


def _explain_failed_patch(tree: Path, patch: Path) -> str:
    report = proc.run(["git", "-C", str(tree), "apply", "--check", "--verbose", str(patch)],
                      check=False).stderr.strip()
    hunks = []
    for m in re.finditer(r"error: patch failed: (\S+):(\d+)", report):
        hunk = rejected_hunk(patch.read_text(), m.group(1), int(m.group(2)))
        if hunk:
            hunks.append(f"rejected hunk in {m.group(1)}:\n{hunk}")
    return "\n".join([report, *hunks])


def apply_series(tree: Path, patches: list[Path]) -> None:
    git(tree, "checkout", "-q", "-B", BRANCH, BASE_TAG)
    for index, patch in enumerate(patches, 1):
        print(f"meminit: applying [{index}/{len(patches)}] {patch.name}", file=sys.stderr, flush=True)
        if proc.run(["git", "-C", str(tree), *GIT_IDENTITY, "am", "-q", str(patch)],
                    check=False).returncode != 0:
            git(tree, "am", "--abort", check=False)
            git(tree, "checkout", "-q", "-B", BRANCH, BASE_TAG)
            raise MeminitError(f"patch {patch.name} does not apply on {BASE_TAG}:\n"
                               f"{_explain_failed_patch(tree, patch)}")
    _record_applied(tree)


def _ensure_base_worktree(tree: Path, base: Path) -> None:
    if base.exists():
        head = git(base, "rev-parse", "HEAD", check=False).strip()
        if head == git(tree, "rev-parse", BASE_TAG).strip():
            return
        git(tree, "worktree", "remove", "--force", str(base), check=False)
        if base.exists():
            shutil.rmtree(base)
    git(tree, "worktree", "prune")
    git(tree, "worktree", "add", "-q", "--detach", str(base), BASE_TAG)


def prepare_trees(linux: Linux = kernels.DEFAULT, reset: bool = False) -> Trees:
    """Unpack (once per package version), then make `series` equal base + patches/VERSION/."""
    version = source_version(linux)
    tree = linux.tree
    have = git(tree, "config", "meminit.sourceversion", check=False).strip() if tree.exists() else ""
    if have != version:
        if have:
            print(f"meminit: source package changed {have} -> {version}; re-unpacking", file=sys.stderr)
        _unpack(version, tree, linux)
    patches = read_series(linux.patches)
    if patch_ids(tree, f"{BASE_TAG}..HEAD") != file_patch_ids(patches) or \
            git(tree, "rev-parse", "--abbrev-ref", "HEAD").strip() != BRANCH:
        reason = _tree_has_own_work(tree)
        if reason and not reset:
            raise MeminitError(f"{tree} differs from {linux.patches.relative_to(paths.REPO)}/ and {reason}; "
                               "export it or pass --reset to discard it")
        apply_series(tree, patches)
    else:
        _record_applied(tree)
    _ensure_base_worktree(tree, linux.base_tree)
    return Trees(series=tree, base=linux.base_tree, linux=linux)


def series_commit(tree: Path = kernels.DEFAULT.tree) -> str:
    return git(tree, "rev-parse", "HEAD").strip()


def provenance(linux: Linux) -> dict[str, str]:
    """What a run's result.json says of the kernel source it built: the kernel, its Debian
    source package and version, and the series commit."""
    return {"linux": linux.version, "source_package": linux.source_package,
            "source_version": source_version(linux), "series_commit": series_commit(linux.tree)}


def export_series(tree: Path = kernels.DEFAULT.tree, patch_dir: Path = kernels.DEFAULT.patches) -> list[Path]:
    """Write base..HEAD of the tree to patch_dir as format-patch files plus the series file."""
    if git(tree, "status", "--porcelain", "--untracked-files=no").strip():
        raise MeminitError(f"{tree} has uncommitted changes: commit them before exporting")
    patch_dir.mkdir(parents=True, exist_ok=True)
    for old in patch_dir.glob("*.patch"):
        old.unlink()
    # A fixed --abbrev (the kernel's recommended 12): git's default grows with the object
    # count, so two trees of the same commits would export different index lines.
    out = git(tree, "format-patch", "--zero-commit", "--no-signature", "--abbrev=12",
              "-o", str(patch_dir), f"{BASE_TAG}..HEAD")
    written = [Path(line) for line in out.splitlines() if line.strip()]
    (patch_dir / "series").write_text("".join(p.name + "\n" for p in written))
    _record_applied(tree)
    return written
