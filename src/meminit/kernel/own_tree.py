"""A kernel git tree of the user's own (`run --tree DIR --base REV [--series REV]`).

The tree is never written to: each of its two commits is checked out into a clone of ours
that shares the tree's objects (`git clone --shared`), under work/own/SLUG/{base,series}, and
built under work/build-own-SLUG/ as any base and series kernel is. The guest config is the
config fragments of the nearest kernel meminit knows (config/ and config/VERSION/ of the one
of the same major version and closest minor, else of the closest major): every option of the
base fragments is required of both commits (a tree that lacks one is refused, the option
named), and the series fragment's options (our KUnit suites, the struct page hash) are set
where the series commit has them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from meminit.core import kernels, paths, proc
from meminit.core.errors import MeminitError
from meminit.core.kernels import Linux
from meminit.kernel import source

OWN_DIR = paths.WORK / "own"
_MAKEFILE_FIELD = re.compile(r"^(VERSION|PATCHLEVEL|SUBLEVEL)\s*=\s*(\d+)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class OwnTree:
    """What `--tree`, `--base` and `--series` name: a git tree and two of its revisions."""

    path: Path
    base: str
    series: str = "HEAD"
    # --linux: whose config fragments to build with; None: the nearest to the Makefile version
    config_of: str | None = None


@dataclass(frozen=True)
class PreparedTree:
    """The two commits checked out and the kernel whose config fragments they build with."""

    path: Path  # the tree, as --tree named it
    trees: source.Trees
    base_commit: str
    series_commit: str
    version: str  # VERSION.PATCHLEVEL of the series commit's Makefile

    def provenance(self) -> dict[str, str]:
        """What a run's result.json says of the source it built (cf. source.provenance)."""
        return {"linux": self.version, "tree": str(self.path), "config_of": self.trees.linux.version,
                "base_commit": self.base_commit, "series_commit": self.series_commit}


def _git(repo: Path, *args: str) -> str:
    return proc.run(["git", "-C", str(repo), *args]).stdout


def _resolve(repo: Path, rev: str, option: str) -> str:
    try:
        return _git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").strip()
    except MeminitError:
        raise MeminitError(f"{option} {rev}: no such commit in {repo}") from None


def _makefile_fields(repo: Path, commit: str) -> dict[str, str]:
    """VERSION, PATCHLEVEL and, where it has one, SUBLEVEL of the top-level Makefile at `commit`."""
    try:
        text = _git(repo, "show", f"{commit}:Makefile")
    except MeminitError:
        raise MeminitError(f"{repo} has no top-level Makefile at {commit[:12]}: not a kernel tree") from None
    fields = dict(_MAKEFILE_FIELD.findall(text))
    if not {"VERSION", "PATCHLEVEL"} <= set(fields):
        raise MeminitError(f"the Makefile of {repo} at {commit[:12]} has no VERSION and PATCHLEVEL: "
                           "not a kernel tree")
    return fields


def makefile_version(repo: Path, commit: str) -> str:
    """VERSION.PATCHLEVEL of the top-level Makefile at `commit`."""
    fields = _makefile_fields(repo, commit)
    return f"{fields['VERSION']}.{fields['PATCHLEVEL']}"


def makefile_release(repo: Path, commit: str) -> str:
    """VERSION.PATCHLEVEL.SUBLEVEL of the top-level Makefile at `commit`: the point release
    a series is against (6.12.118)."""
    fields = _makefile_fields(repo, commit)
    if "SUBLEVEL" not in fields:
        raise MeminitError(f"the Makefile of {repo} at {commit[:12]} has no SUBLEVEL")
    return f"{fields['VERSION']}.{fields['PATCHLEVEL']}.{fields['SUBLEVEL']}"


def _as_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def nearest_linux(version: str) -> Linux:
    """The kernel meminit knows whose config is likeliest to fit `version`'s Kconfig: the same
    major version and the closest minor (7.1 -> 7.3, 6.18 -> 6.12), else the closest major;
    a tie goes to the newer."""
    want = _as_tuple(version)

    def distance(k: Linux) -> tuple[int, int, tuple[int, ...]]:
        have = _as_tuple(k.version)
        return abs(have[0] - want[0]), abs(have[1] - want[1]), tuple(-v for v in have)
    return min(kernels.KERNELS.values(), key=distance)


def slug(path: Path) -> str:
    """work/ names for a tree: its directory's name and a digest of its absolute path."""
    absolute = str(path.resolve())
    name = re.sub(r"[^A-Za-z0-9._-]", "_", path.resolve().name) or "tree"
    return f"{name}-{hashlib.sha256(absolute.encode()).hexdigest()[:8]}"


def _checkout(repo: Path, commit: str, dest: Path) -> None:
    """dest: a clone sharing repo's objects, at commit (only changed files rewritten)."""
    fresh = not (dest / ".git").exists()
    if fresh:
        dest.parent.mkdir(parents=True, exist_ok=True)
        print(f"meminit: cloning {repo} (objects shared) into {dest}", file=sys.stderr, flush=True)
        proc.run(["git", "clone", "--quiet", "--shared", "--no-checkout", str(repo), str(dest)])
    head = proc.run(["git", "-C", str(dest), "rev-parse", "--verify", "--quiet", "HEAD^{commit}"],
                    check=False).stdout.strip()
    if fresh or head != commit:
        print(f"meminit: checking out {commit[:12]} in {dest}", file=sys.stderr, flush=True)
        _git(dest, "checkout", "--quiet", "--force", "--detach", commit)


def prepare(own: OwnTree) -> PreparedTree:
    """Check the tree and its revisions, check out both commits."""
    repo = own.path.resolve()
    if not repo.is_dir():
        raise MeminitError(f"--tree {own.path}: no such directory")
    try:
        _git(repo, "rev-parse", "--git-dir")
    except MeminitError:
        raise MeminitError(f"--tree {own.path}: not a git repository") from None
    base = _resolve(repo, own.base, "--base")
    series = _resolve(repo, own.series, "--series")
    if base == series:
        raise MeminitError(f"--base {own.base} and --series {own.series} are the same commit "
                           f"({base[:12]}): nothing to compare")
    version = makefile_version(repo, series)
    makefile_version(repo, base)  # refuses a base that is not a kernel tree
    name = slug(repo)
    config_of = kernels.KERNELS[own.config_of] if own.config_of else nearest_linux(version)
    own_linux = dataclasses.replace(config_of, work_suffix=f"-own-{name}")
    dests = OWN_DIR / name
    _checkout(repo, base, dests / "base")
    _checkout(repo, series, dests / "series")
    return PreparedTree(path=own.path,
                        trees=source.Trees(series=dests / "series", base=dests / "base", linux=own_linux),
                        base_commit=base, series_commit=series, version=version)
