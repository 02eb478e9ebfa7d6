"""The series as mail: git format-patch with a cover letter and base-commit, each patch's
recipients from the kernel's get_maintainer.pl, its changelog (patches/changelog) below
the "---" where git am drops it, and one mbox of the lot for b4 or git send-email."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from meminit import checks, paths, proc, source
from meminit.errors import MeminitError

CHANGELOG = paths.PATCHES / "changelog"
MBOX_NAME = "series.mbox"
COVER_SUBJECT_PLACEHOLDER = "*** SUBJECT HERE ***"
COVER_BLURB_PLACEHOLDER = "*** BLURB HERE ***"


@dataclass(frozen=True)
class Recipients:
    to: tuple[str, ...]
    cc: tuple[str, ...]


@dataclass(frozen=True)
class Mail:
    cover: Path
    patches: list[Path]
    mbox: Path


def read_changelog(path: Path = CHANGELOG) -> dict[str, list[str]]:
    """Subject -> its changelog lines. A block is a subject line (flush left) and the lines
    indented or starting with '-' under it; '#' lines and blank lines separate."""
    blocks: dict[str, list[str]] = {}
    subject = None
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            subject = None if not line.strip() else subject
            continue
        if line.startswith(("-", " ")):
            if subject is None:
                raise MeminitError(f"{path}:{number}: a changelog line under no patch subject")
            blocks[subject].append(line)
            continue
        subject = line.strip()
        if subject in blocks:
            raise MeminitError(f"{path}:{number}: a second block for {subject!r}")
        blocks[subject] = []
    return blocks


def changelog_for(subjects: list[str], blocks: dict[str, list[str]]) -> dict[str, list[str]]:
    """Each subject's block; fails naming every patch without one, or with an empty one, and
    every block that names no patch (a renamed patch whose block was left behind)."""
    missing = [s for s in subjects if not blocks.get(s)]
    stray = [s for s in blocks if s not in subjects]
    problems = [f"no changelog for {s!r}" for s in missing] + [f"changelog for no patch: {s!r}" for s in stray]
    if problems:
        raise MeminitError(f"{CHANGELOG.name}: " + "; ".join(problems))
    return {s: blocks[s] for s in subjects}


_ADDRESS = re.compile(r"<?([^<>\s]+@[^<>\s]+?)>?$")


def parse_get_maintainer(output: str, author: str) -> Recipients:
    """get_maintainer.pl's lines ("Name <addr> (role:SECTION)", "list@host (open list:...)"):
    maintainers to To, reviewers and lists to Cc, the patch's author left out, no repeats."""
    to: list[str] = []
    cc: list[str] = []
    author_address = _address(author)
    for line in output.splitlines():
        line = line.strip()
        if not line or "@" not in line:
            continue
        who, _, role = line.partition(" (")
        who = who.strip()
        if _address(who) == author_address or who in to or who in cc:
            continue
        (to if role.startswith("maintainer") else cc).append(who)
    return Recipients(tuple(to), tuple(cc))


def _address(who: str) -> str:
    m = _ADDRESS.search(who.strip())
    return m.group(1).lower() if m else who.strip().lower()


def recipients(tree: Path, patch: Path, author: str) -> Recipients:
    # --no-git: the tree's history is one import commit, nothing to learn authors from
    report = proc.run(["perl", "scripts/get_maintainer.pl", "--no-git", "--no-git-fallback", str(patch)],
                      f"get_maintainer.pl {patch.name}", cwd=tree)
    return parse_get_maintainer(report.stdout, author)


def headers(text: str) -> tuple[str, str]:
    """A mail's header block and its body (the blank line between them dropped)."""
    head, sep, body = text.partition("\n\n")
    if not sep:
        raise MeminitError("a mail without a body")
    return head, body


def header_value(text: str, name: str) -> str:
    """An unfolded header of a mail."""
    head, _ = headers(text)
    m = re.search(rf"^{name}: (.*(?:\n[ \t].*)*)", head, re.M | re.I)
    return re.sub(r"\n[ \t]+", " ", m.group(1)).strip() if m else ""


HEADER_WIDTH = 78


def folded(name: str, addresses: tuple[str, ...]) -> str:
    """`Name: a, b, ...` folded (RFC 5322) to lines of at most HEADER_WIDTH where it can be."""
    lines = [f"{name}:"]
    for i, address in enumerate(addresses):
        item = address + ("," if i < len(addresses) - 1 else "")
        if len(lines[-1]) + 1 + len(item) > HEADER_WIDTH and lines[-1] != f"{name}:":
            lines.append("")
        lines[-1] += " " + item
    return "\n".join(lines)


def with_recipients(text: str, who: Recipients) -> str:
    head, body = headers(text)
    lines = [folded("To", who.to)] if who.to else []
    lines += [folded("Cc", who.cc)] if who.cc else []
    return "\n".join([head, *lines]) + "\n\n" + body


def with_sender(text: str, sender: str) -> str:
    """The mail with its From: header (format-patch gives a cover letter the committer's)."""
    head, body = headers(text)
    head, count = re.subn(r"^From: .*(?:\n[ \t].*)*$", f"From: {sender}", head, count=1, flags=re.M)
    if not count:
        raise MeminitError("a mail without a From: header")
    return head + "\n\n" + body


def with_changelog(text: str, changes: list[str]) -> str:
    """The patch mail with `changes` right below its first "---" line (before the diffstat)."""
    marker = "\n---\n"
    if marker not in text:
        raise MeminitError("a patch mail without its '---' line")
    before, after = text.split(marker, 1)
    block = "\n".join(["Changes before the first posting:", *changes]) + "\n\n"
    return before + marker + block + after


def with_cover(text: str, subject: str, blurb: str) -> str:
    for placeholder in (COVER_SUBJECT_PLACEHOLDER, COVER_BLURB_PLACEHOLDER):
        if placeholder not in text:
            raise MeminitError(f"git format-patch's cover letter has no {placeholder!r}")
    return text.replace(COVER_SUBJECT_PLACEHOLDER, subject).replace(COVER_BLURB_PLACEHOLDER, blurb.rstrip())


def write(tree: Path, out_dir: Path, cover_subject: str, cover_blurb: str,
          subject_prefix: str = "RFC PATCH") -> Mail:
    """format-patch base..HEAD of `tree` into out_dir as mail, then one mbox of it."""
    subjects = source.git(tree, "log", "--reverse", "--format=%s", f"{source.BASE_TAG}..HEAD").splitlines()
    if not subjects:
        raise MeminitError(f"{tree} has no commits on {source.BASE_TAG}: nothing to mail")
    changes = changelog_for(subjects, read_changelog())
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in [*out_dir.glob("*.patch"), out_dir / MBOX_NAME]:
        old.unlink(missing_ok=True)
    written = source.git(tree, "format-patch", "--cover-letter", f"--base={source.BASE_TAG}",
                         "--thread=shallow", f"--subject-prefix={subject_prefix}", "--abbrev=12",
                         "--no-signature", "-o", str(out_dir), f"{source.BASE_TAG}..HEAD")
    files = [Path(line) for line in written.splitlines() if line.strip()]
    cover, patches = files[0], files[1:]
    everyone_to: list[str] = []
    everyone_cc: list[str] = []
    sender = header_value(patches[0].read_text(), "From")
    for patch, subject in zip(patches, subjects):
        text = patch.read_text()
        who = recipients(tree, patch, header_value(text, "From"))
        everyone_to += [a for a in who.to if a not in everyone_to]
        everyone_cc += [a for a in who.cc if a not in everyone_cc]
        patch.write_text(with_recipients(with_changelog(text, changes[subject]), who))
    cover_text = with_sender(with_cover(cover.read_text(), cover_subject, cover_blurb), sender)
    cover.write_text(with_recipients(cover_text, Recipients(tuple(everyone_to),
                                                            tuple(a for a in everyone_cc if a not in everyone_to))))
    mbox = out_dir / MBOX_NAME
    mbox.write_text("".join(f.read_text() for f in files))
    return Mail(cover=cover, patches=patches, mbox=mbox)


def same_series(tree: Path, applied: str) -> str | None:
    """Why the commits git am made differ from base..HEAD (their tree, or a message: the
    changelog leaking into a commit), or None."""
    if source.git(tree, "rev-parse", f"{applied}^{{tree}}") != source.git(tree, "rev-parse", "HEAD^{tree}"):
        return "the applied series does not end at the series' tree"
    messages = [source.git(tree, "log", "--reverse", "--format=%B%x00", f"{source.BASE_TAG}..{rev}")
                for rev in (applied, "HEAD")]
    if messages[0] != messages[1]:
        return "the applied commits' messages differ from the series' (changelog below '---' kept?)"
    return None


def checkpatch(tree: Path, mail: Mail) -> list[str]:
    """checkpatch --strict on every patch as it will be sent (headers, changelog and all)."""
    return checks.checkpatch(tree, mail.patches)


def apply_check(tree: Path, mail: Mail, scratch: Path) -> str:
    """git am the mbox onto the base in a scratch worktree; the commit it ends at (kept in
    the tree's object store after the worktree goes).

    The cover letter has no diff: git am stops on it, and is told to skip it, as b4 would."""
    if scratch.exists():
        source.git(tree, "worktree", "remove", "--force", str(scratch), check=False)
    source.git(tree, "worktree", "add", "-q", "--detach", str(scratch), source.BASE_TAG)
    try:
        am = proc.run(["git", "-C", str(scratch), *source.GIT_IDENTITY, "am", "-q", str(mail.mbox)],
                      check=False)
        if am.returncode != 0:
            if not re.search("Patch is empty|No valid patches in input", am.stdout + am.stderr):
                raise MeminitError(f"git am {mail.mbox} failed:\n{proc.tail(am.stdout + am.stderr)}")
            proc.run(["git", "-C", str(scratch), *source.GIT_IDENTITY, "am", "-q", "--skip"],
                     f"git am {mail.mbox} (after skipping the cover letter)")
        return source.git(scratch, "rev-parse", "HEAD").strip()
    finally:
        source.git(tree, "worktree", "remove", "--force", str(scratch), check=False)
