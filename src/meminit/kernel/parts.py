"""The parts of a kernel's series (issue 66): `patches/VERSION/series` lists them in the order
they apply, each a folder of `git format-patch` files with a `series` of its own:

- `core`: the series mailed to mm as `[PATCH]` (`export --mbox`), always applied;
- `rfc/NAME`: an opt-in extra on the core, mailed apart as `[RFC PATCH]` (`--rfc NAME`) and
  applied only when asked for (`--rfc NAME` on `tree`, `run`, `test`, `boot` ...); a line
  may name the parts it needs besides the core (`rfc/auto rfc/threads`);
- `test-only`: what the harness needs and nobody mails, always applied, last;
- any other folder: a topic mailed to other owners (`--topic NAME`), always applied.

The default stack is every part but the RFCs, in the listed order; RFCs asked for take their
place in it. Every part but the RFCs must apply with and without them (`tree` applies both).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from meminit.core.errors import MeminitError

CORE, TEST_ONLY, RFC_PREFIX = "core", "test-only", "rfc/"


@dataclass(frozen=True)
class Part:
    name: str  # its folder under patches/VERSION/
    needs: tuple[str, ...] = ()  # the parts it applies on besides the core

    @property
    def kind(self) -> str:
        """core, rfc, test-only or topic."""
        if self.name in (CORE, TEST_ONLY):
            return self.name
        return "rfc" if self.name.startswith(RFC_PREFIX) else "topic"

    @property
    def short(self) -> str:
        """The name `--rfc` and `--topic` take: 'threads' for rfc/threads."""
        return self.name.removeprefix(RFC_PREFIX)


def read_series(patch_dir: Path) -> list[Path]:
    """The patches of one folder in the order of its series file (blank lines and # comments
    ignored); every .patch file of the folder must be listed, and every listed one exist."""
    series_file = patch_dir / "series"
    if not series_file.exists():
        return []
    names = [line.split("#", 1)[0].strip() for line in series_file.read_text().splitlines()]
    names = [n for n in names if n]
    missing = [n for n in names if not (patch_dir / n).is_file()]
    if missing:
        raise MeminitError(f"{series_file} names files that do not exist: {', '.join(missing)}")
    listed = set(names)
    stray = sorted(p.name for p in patch_dir.glob("*.patch") if p.name not in listed)
    if stray:
        raise MeminitError(f"{patch_dir} has files not listed in its series: {', '.join(stray)}")
    return [patch_dir / n for n in names]


def read_parts(patch_root: Path) -> list[Part]:
    """The parts patch_root/series lists, in order: core first, test-only last, each a folder."""
    series_file = patch_root / "series"
    if not series_file.exists():
        raise MeminitError(f"{series_file} is missing: it lists the series' parts (docs/tree-build-export.md)")
    found = []
    for line in series_file.read_text().splitlines():
        words = line.split("#", 1)[0].split()
        if words:
            found.append(Part(words[0], tuple(words[1:])))
    names = [p.name for p in found]
    problems = [f"{p.name}/ is not a folder" for p in found if not (patch_root / p.name).is_dir()]
    if not names or names[0] != CORE:
        problems.append("the first part is not core")
    if TEST_ONLY in names and names[-1] != TEST_ONLY:
        problems.append("test-only is not the last part")
    problems += [f"{p.name} needs {n}, which is not listed before it" for i, p in enumerate(found)
                 for n in p.needs if n not in names[:i]]
    if len(set(names)) != len(names):
        problems.append("a part is listed twice")
    if problems:
        raise MeminitError(f"{series_file}: {'; '.join(problems)}")
    return found


def selected(parts: list[Part], rfcs: tuple[str, ...] = ()) -> list[Part]:
    """The stack: every part but the RFCs, and the RFCs named ('threads' or 'rfc/threads'),
    in the listed order; an RFC whose needs are not named too is refused."""
    by_short = {p.short: p for p in parts if p.kind == "rfc"}
    unknown = [n for n in rfcs if n.removeprefix(RFC_PREFIX) not in by_short]
    if unknown:
        raise MeminitError(f"no RFC part {', '.join(unknown)}: this kernel's are "
                           f"{', '.join(sorted(by_short)) or 'none'}")
    wanted = {by_short[n.removeprefix(RFC_PREFIX)].name for n in rfcs}
    stack = [p for p in parts if p.kind != "rfc" or p.name in wanted]
    names = {p.name for p in stack}
    lacking = [f"{p.short} needs {n.removeprefix(RFC_PREFIX)}" for p in stack for n in p.needs if n not in names]
    if lacking:
        raise MeminitError(f"--rfc: {'; '.join(lacking)} (name both, in any order)")
    return stack


def read_stack(patch_root: Path, rfcs: tuple[str, ...] = ()) -> list[tuple[Part, list[Path]]]:
    """Each part of the stack with its patches."""
    return [(p, read_series(patch_root / p.name)) for p in selected(read_parts(patch_root), rfcs)]


def stack_patches(patch_root: Path, rfcs: tuple[str, ...] = ()) -> list[Path]:
    """The stack's patches in the order they apply."""
    return [p for _, ps in read_stack(patch_root, rfcs) for p in ps]


def assign(commits: list[tuple[str, str]], recorded: list[tuple[str, str, str]], order: list[str]) -> list[str]:
    """The part of each commit of a tree ((subject, patch-id) each), from what was recorded
    when its patches were applied or exported ((part, subject, patch-id) per commit): by
    patch-id, which a reworded commit keeps; else by subject, which an edited diff keeps; a
    commit new in both ways joins the part of the commit before it (the first, the core). The
    parts must be listed in `order` and follow it, each in one run of commits."""
    by_id = {pid: part for part, _, pid in recorded}
    by_subject = {subject: part for part, subject, _ in recorded}
    out: list[str] = []
    for subject, pid in commits:
        out.append(by_id.get(pid) or by_subject.get(subject) or (out[-1] if out else CORE))
    unknown = sorted(set(out) - set(order))
    if unknown:
        raise MeminitError(f"the tree's commits belong to parts the series no longer lists: {', '.join(unknown)}")
    runs = [p for i, p in enumerate(out) if i == 0 or out[i - 1] != p]
    if len(set(runs)) != len(runs) or runs != sorted(runs, key=order.index):
        raise MeminitError(f"the tree's commits are no longer in the parts' order ({' -> '.join(order)}): "
                           f"they run {' -> '.join(runs)}; reorder them (git rebase -i)")
    return out


def filed_on_rfcs(names: list[str], pids: list[str], recorded: list[tuple[str, str, str]],
                  order: list[str]) -> set[str]:
    """The parts `export` leaves as filed in a tree whose commits (their parts `names`, their
    patch-ids `pids`) carry an RFC: the topics and test-only after it in `order`. Their files
    hold the default stack's context, the tree's commits of them the RFCs'; a change to them
    since the tree recorded them (`recorded`: part, subject, patch-id) is refused."""
    rfcs = [part for part in order if part in names and part.startswith(RFC_PREFIX)]
    if not rfcs:
        return set()
    carried = set(names) | {part for part, _, _ in recorded}
    after = [part for part in order[order.index(rfcs[0]):] if part in carried and not part.startswith(RFC_PREFIX)]
    changed = [part for part in after if [pid for pid, name in zip(pids, names) if name == part] !=
               [pid for name, _, pid in recorded if name == part]]
    if changed:
        raise MeminitError(f"{', '.join(changed)} changed in a tree that carries RFCs, where its commits hold "
                           "the RFCs' context: make the change in the default stack's tree (`meminit tree`, "
                           "without --rfc), export it there, then apply the RFCs again")
    return set(after)
