"""Kernel source and the series: a Debian linux-source package as a git tree, patches/ applied on top.

Layout under work/, per kernel (linux.Linux: 6.12's names below, 7.3's carry "-7.3"):
  linux/       git repo; tag `base` is the pristine Debian source, branch `series`
               carries one commit per patch of the parts applied (parts.py: the default
               stack, or with the RFCs asked for), in their order (edit here, then
               `meminit export`, which writes each commit back to its part's folder)
  linux-base/  a detached worktree at `base`, so base and series build side by side
               without touching each other's files (and mtimes)
  sources/VERSION/  a source package fetched from another Debian suite, unpacked (7.3)
"""

from __future__ import annotations

import json
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
from meminit.kernel import parts
from meminit.kernel.parts import read_series

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


def _parts_record(tree: Path) -> Path:
    return tree / ".git" / "meminit-parts.json"


def _file_subject(patch: Path) -> str:
    """A format-patch file's subject, without its [PATCH n/m] prefix."""
    head = patch.read_text().split("\n\n", 1)[0]
    found = re.search(r"^Subject: (.*(?:\n[ \t].*)*)", head, re.M)
    subject = re.sub(r"\s*\n[ \t]+", " ", found[1]) if found else ""
    return re.sub(r"^\[[^]]*\] ", "", subject).strip()


def parts_of_files(patch_root: Path) -> list[tuple[str, str, str]]:
    """(part, subject, patch-id) of every patch file of every part under patch_root."""
    out = []
    for part in parts.read_parts(patch_root):
        files = read_series(patch_root / part.name)
        out += [(part.name, _file_subject(f), pid) for f, pid in zip(files, file_patch_ids(files))]
    return out


def _read_record(tree: Path) -> list[tuple[str, str, str]] | None:
    """The tree's record of (part, subject, patch-id) per commit; None where it has none, or
    one of another shape (made before patch-ids were recorded)."""
    record = _parts_record(tree)
    entries = json.loads(record.read_text()) if record.exists() else None
    if entries is None or not all(len(e) == 3 for e in entries):
        return None
    return [(part, subject, pid) for part, subject, pid in entries]


def recorded_parts(tree: Path, patch_root: Path | None = None) -> list[tuple[str, str, str]]:
    """(part, subject, patch-id) of each commit as the tree's patches were applied or exported;
    where the tree records none (made before the parts), what the files under `patch_root` say."""
    entries = _read_record(tree)
    if entries is not None:
        return entries
    if patch_root is None:
        raise MeminitError(f"{tree} records no parts: run `meminit tree`")
    # the files of the parts the tree carries (one of their patches among its commits): a
    # part it never carried is not one whose commits are gone
    files = parts_of_files(patch_root)
    carried = {pid for _, pid in _tree_commits(tree)[1]}
    kept = {part for part, _, pid in files if pid in carried}
    return [entry for entry in files if entry[0] in kept]


def _tree_commits(tree: Path) -> tuple[list[str], list[tuple[str, str]]]:
    """base..HEAD: the commits and (subject, patch-id) of each."""
    commits = git(tree, "rev-list", "--reverse", f"{BASE_TAG}..HEAD").split()
    subjects = git(tree, "log", "--reverse", "--format=%s", f"{BASE_TAG}..HEAD").splitlines()
    return commits, list(zip(subjects, patch_ids(tree, f"{BASE_TAG}..HEAD")))


def _record_parts(tree: Path, names: list[str]) -> None:
    _, commits = _tree_commits(tree)
    _parts_record(tree).write_text(json.dumps([[n, s, pid] for n, (s, pid) in zip(names, commits)]) + "\n")


def part_range(tree: Path, name: str) -> tuple[str, str]:
    """The commits of one part in the tree: (the commit before its first, its last)."""
    commits, ids = _tree_commits(tree)
    recorded = recorded_parts(tree)
    names = parts.assign(ids, recorded, list(dict.fromkeys(p for p, _, _ in recorded)))
    mine = [i for i, n in enumerate(names) if n == name]
    if not mine:
        raise MeminitError(f"{tree} carries no commit of {name}")
    return (commits[mine[0] - 1] if mine[0] else git(tree, "rev-parse", BASE_TAG).strip()), commits[mine[-1]]


def tree_parts(tree: Path) -> list[str]:
    """The parts the tree carries, in order, as recorded."""
    return list(dict.fromkeys(part for part, _, _ in recorded_parts(tree)))


def applied_in_scratch(tree: Path, patches: list[Path]) -> str:
    """The commit the patches make on `base`, applied in a scratch worktree of the tree
    (removed after): the tree's own checkout is left as it is."""
    scratch = tree.with_name(tree.name + ".applying")
    if scratch.exists():
        git(tree, "worktree", "remove", "--force", str(scratch), check=False)
        shutil.rmtree(scratch, ignore_errors=True)
    git(tree, "worktree", "prune")
    git(tree, "worktree", "add", "-q", "--detach", str(scratch), BASE_TAG)
    try:
        for index, patch in enumerate(patches, 1):
            print(f"meminit: applying [{index}/{len(patches)}] {patch.parent.name}/{patch.name}",
                  file=sys.stderr, flush=True)
            if proc.run(["git", "-C", str(scratch), *GIT_IDENTITY, "am", "-q", str(patch)],
                        check=False).returncode != 0:
                git(scratch, "am", "--abort", check=False)
                raise MeminitError(f"patch {patch.parent.name}/{patch.name} does not apply on {BASE_TAG}:\n"
                                   f"{_explain_failed_patch(scratch, patch)}")
        tip = git(scratch, "rev-parse", "HEAD").strip()
    finally:
        git(tree, "worktree", "remove", "--force", str(scratch), check=False)
    return tip


def apply_series(tree: Path, patches: list[Path], names: list[str] | None = None) -> None:
    """The patches as commits on `base`, recorded with the part of each (`names`; by default
    all of the core). They are applied in a scratch worktree and the tree then checked out at
    the result, so that only files that differ from what it had are written: a switch of
    RFC parts rebuilds what they touch, not every file the series touches."""
    tip = applied_in_scratch(tree, patches)
    git(tree, "checkout", "-q", "-f", "-B", BRANCH, tip)
    _record_applied(tree)
    _record_parts(tree, names or [parts.CORE] * len(patches))


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
    """Unpack (once per package version), then make `series` equal base + the stack of
    patches/VERSION/'s parts: the default, and the RFCs linux.rfcs names (parts.selected())."""
    version = source_version(linux)
    tree = linux.tree
    have = git(tree, "config", "meminit.sourceversion", check=False).strip() if tree.exists() else ""
    if have != version:
        if have:
            print(f"meminit: source package changed {have} -> {version}; re-unpacking", file=sys.stderr)
        _unpack(version, tree, linux)
    stack = parts.read_stack(linux.patches, linux.rfcs)
    patches = [p for _, ps in stack for p in ps]
    names = [part.name for part, ps in stack for _ in ps]
    if patch_ids(tree, f"{BASE_TAG}..HEAD") != file_patch_ids(patches) or \
            git(tree, "rev-parse", "--abbrev-ref", "HEAD").strip() != BRANCH:
        reason = _tree_has_own_work(tree)
        if reason and not reset:
            raise MeminitError(f"{tree} differs from {linux.patches.relative_to(paths.REPO)}/ "
                               f"({' + '.join(p.name for p, _ in stack)}) and {reason}; "
                               "export it or pass --reset to discard it")
        apply_series(tree, patches, names)
    elif [n for n, _, _ in _read_record(tree) or []] != names:
        # the same diffs, recorded before the parts or with a patch since moved to another
        # part: the files say where each belongs. The marker stays: patch-ids ignore commit
        # messages, so a reword not yet exported still counts as the tree's own work
        _record_parts(tree, names)
    _ensure_base_worktree(tree, linux.base_tree)
    return Trees(series=tree, base=linux.base_tree, linux=linux)


def series_commit(tree: Path = kernels.DEFAULT.tree) -> str:
    return git(tree, "rev-parse", "HEAD").strip()


def provenance(linux: Linux) -> dict[str, str]:
    """What a run's result.json says of the kernel source it built: the kernel, its Debian
    source package and version, the series commit and the parts it carries."""
    return {"linux": linux.version, "source_package": linux.source_package,
            "source_version": source_version(linux), "series_commit": series_commit(linux.tree),
            "series_parts": carried_parts(linux)}


def carried_parts(linux: Linux) -> str:
    """The parts the kernel's tree carries, 'core + clearing + test-only'; '' without a tree."""
    if not (linux.tree / ".git").exists():
        return ""
    return " + ".join(dict.fromkeys(p for p, _, _ in recorded_parts(linux.tree, linux.patches)))


def export_series(tree: Path = kernels.DEFAULT.tree, patch_root: Path = kernels.DEFAULT.patches) -> list[Path]:
    """Write base..HEAD of the tree back to the folders of its parts under patch_root as
    format-patch files, each folder with its series (parts.assign(): a commit keeps its part
    by patch-id or subject, a new one joins the part of the commit before it). A part the tree
    carried whose commits are all gone is emptied; parts it does not carry are left as they are,
    and so are those after an RFC it carries (parts.filed_on_rfcs())."""
    if git(tree, "status", "--porcelain", "--untracked-files=no").strip():
        raise MeminitError(f"{tree} has uncommitted changes: commit them before exporting")
    # Debian's .gitignore ignores every new file, so `git add` skips a new source file
    # silently and the tree still builds with it: no file may sit outside the commits
    untracked = git(tree, "ls-files", "--others").split()
    if untracked:
        raise MeminitError(f"{tree} has files no commit holds ({', '.join(untracked[:5])}"
                           f"{' ...' if len(untracked) > 5 else ''}): `git add -f` and commit the new "
                           "ones (Debian's .gitignore hides them from `git add`), delete the rest")
    order = [p.name for p in parts.read_parts(patch_root)]
    recorded = recorded_parts(tree, patch_root)
    commits, ids = _tree_commits(tree)
    names = parts.assign(ids, recorded, order)
    filed = parts.filed_on_rfcs(names, [pid for _, pid in ids], recorded, order)
    written: list[Path] = []
    for name in [n for n in dict.fromkeys([p for p, _, _ in recorded] + names) if n not in filed]:
        mine = [c for c, n in zip(commits, names) if n == name]
        folder = patch_root / name
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.glob("*.patch"):
            old.unlink()
        files: list[Path] = []
        if mine:
            # A fixed --abbrev (the kernel's recommended 12): git's default grows with the object
            # count, so two trees of the same commits would export different index lines.
            out = git(tree, "format-patch", "--zero-commit", "--no-signature", "--abbrev=12",
                      "-o", str(folder), f"{mine[0]}^..{mine[-1]}")
            files = [Path(line) for line in out.splitlines() if line.strip()]
        (folder / "series").write_text("".join(p.name + "\n" for p in files))
        written += files
    _record_applied(tree)
    _record_parts(tree, names)
    return written
