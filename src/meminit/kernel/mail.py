"""The series as mail: git format-patch with a cover letter and base-commit, each patch's
recipients from the kernel's get_maintainer.pl, its changelog (patches/VERSION/changelog) below
the "---" where git am drops it, and one mbox of the lot for b4 or git send-email."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from meminit.core import kernels, paths, proc
from meminit.kernel import source
from meminit.core.errors import MeminitError

CHANGELOG = kernels.DEFAULT.patches / "changelog"
CHANGELOG_HEADING = "Changes from the review before this posting:"
NO_CHANGES = ["- none"]   # a block that says so: no changelog in that patch's mail
MBOX_NAME = "series.mbox"
MARKER = ".meminit-mail"  # a directory with it holds mail of ours, which the next export replaces
# get_maintainer.pl's roles for the people who take a patch (MAINTAINERS' M: lines)
TO_ROLES = ("maintainer", "supporter", "odd fixer", "chief penguin")
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
    # what was mailed: after the first commit up to the second
    commits: tuple[str, str] = (source.BASE_TAG, "HEAD")


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


def changelog_for(subjects: list[str], blocks: dict[str, list[str]], whole: bool = True) -> dict[str, list[str]]:
    """Each subject's block (NO_CHANGES for "- none"); fails naming every patch without one,
    or with an empty one, and, where `subjects` are the `whole` series, every block that names
    no patch (a renamed patch whose block was left behind)."""
    missing = [s for s in subjects if not blocks.get(s)]
    stray = [s for s in blocks if s not in subjects] if whole else []
    problems = [f"no changelog for {s!r}" for s in missing] + [f"changelog for no patch: {s!r}" for s in stray]
    if problems:
        raise MeminitError(f"{CHANGELOG.name}: " + "; ".join(problems))
    return {s: blocks[s] for s in subjects}


_ADDRESS = re.compile(r"<?([^<>\s]+@[^<>\s]+?)>?$")


def parse_get_maintainer(output: str, author: str) -> Recipients:
    """get_maintainer.pl's lines ("Name <addr> (role:SECTION)", "list@host (open list:...)"):
    those who take patches (TO_ROLES) to To, reviewers and lists to Cc; the author, addresses
    nobody can mail (@localhost) and repeats of an address (in any case) left out."""
    to: list[str] = []
    cc: list[str] = []
    seen = {_address(author)}
    for line in output.splitlines():
        line = line.strip()
        if not line or "@" not in line:
            continue
        who, _, role = line.partition(" (")
        who = who.strip()
        address = _address(who)
        if address in seen or not mailable(address):
            continue
        seen.add(address)
        (to if role.startswith(TO_ROLES) else cc).append(who)
    return Recipients(tuple(to), tuple(cc))


def mailable(address: str) -> bool:
    return "@" in address and not address.endswith(("@localhost", "@localhost.localdomain"))


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


def _header(name: str) -> str:
    """A regex of header `name` with its folded continuation lines; group 1 its value."""
    return rf"^{name}: (.*(?:\n[ \t].*)*)$"


def header_value(text: str, name: str) -> str:
    """An unfolded header of a mail."""
    head, _ = headers(text)
    m = re.search(_header(name), head, re.M | re.I)
    return re.sub(r"\n[ \t]+", " ", m.group(1)).strip() if m else ""


def with_header(text: str, name: str, header: str) -> str:
    """The mail with header `name` (and its continuation lines) replaced by `header`."""
    head, body = headers(text)
    head, count = re.subn(_header(name), lambda m: header, head, count=1, flags=re.M)
    if not count:
        raise MeminitError(f"a mail without a {name}: header")
    return head + "\n\n" + body


HEADER_WIDTH = 78


def folded(name: str, pieces: list[str]) -> str:
    """`Name: piece piece ...` folded (RFC 5322) between pieces, to lines of at most
    HEADER_WIDTH where it can be."""
    lines = [f"{name}:"]
    for piece in pieces:
        if len(lines[-1]) + 1 + len(piece) > HEADER_WIDTH and lines[-1] != f"{name}:":
            lines.append("")
        lines[-1] += " " + piece
    return "\n".join(lines)


def address_list(name: str, addresses: tuple[str, ...]) -> str:
    return folded(name, [a + "," for a in addresses[:-1]] + list(addresses[-1:]))


def with_recipients(text: str, who: Recipients) -> str:
    head, body = headers(text)
    lines = [address_list("To", who.to)] if who.to else []
    lines += [address_list("Cc", who.cc)] if who.cc else []
    return "\n".join([head, *lines]) + "\n\n" + body


def with_sender(text: str, sender: str) -> str:
    """The mail with its From: header (format-patch gives a cover letter the committer's)."""
    return with_header(text, "From", f"From: {sender}")


def with_changelog(text: str, changes: list[str]) -> str:
    """The patch mail with `changes` right below its first "---" line (before the diffstat)."""
    marker = "\n---\n"
    if marker not in text:
        raise MeminitError("a patch mail without its '---' line")
    if changes == NO_CHANGES:
        return text
    before, after = text.split(marker, 1)
    block = "\n".join([CHANGELOG_HEADING, *changes]) + "\n\n"
    return before + marker + block + after


def as_sender(text: str, author: str, sender: str) -> str:
    """The mail from `sender`, who signs it off in the author's place (the series' commits
    carry the harness's identity, which is no address)."""
    text = with_sender(text, sender)
    head, body = headers(text)
    return head + "\n\n" + signed_off_by(body, author, sender)


def signed_off_by(text: str, author: str, sender: str) -> str:
    """`text` with the author's Signed-off-by lines made the sender's."""
    return re.sub(rf"^Signed-off-by: {re.escape(author)}$", lambda m: f"Signed-off-by: {sender}", text, flags=re.M)


def utf8_declared(text: str) -> str:
    """A mail whose body has non-ASCII text, with the MIME headers that say it is UTF-8."""
    head, body = headers(text)
    if body.isascii() or re.search(r"^Content-Type:", head, re.M | re.I):
        return text
    return (head + "\nMIME-Version: 1.0\nContent-Type: text/plain; charset=UTF-8\n"
            "Content-Transfer-Encoding: 8bit\n\n" + body)


def folded_subject(text: str) -> str:
    """The mail with its Subject: folded at spaces to lines of at most HEADER_WIDTH."""
    return with_header(text, "Subject", folded("Subject", header_value(text, "Subject").split(" ")))


def with_cover(text: str, subject: str, blurb: str) -> str:
    for placeholder in (COVER_SUBJECT_PLACEHOLDER, COVER_BLURB_PLACEHOLDER):
        if placeholder not in text:
            raise MeminitError(f"git format-patch's cover letter has no {placeholder!r}")
    return text.replace(COVER_SUBJECT_PLACEHOLDER, subject).replace(COVER_BLURB_PLACEHOLDER, blurb.rstrip())


def sender_from_git(repo: Path = paths.REPO) -> str:
    """`Name <address>` of git's user.name and user.email where `repo` is; '' if unset."""
    name, email = (proc.run(["git", "-C", str(repo), "config", key], check=False).stdout.strip()
                   for key in ("user.name", "user.email"))
    return f"{name} <{email}>" if name and email else ""


def check_sender(sender: str) -> str:
    if not sender:
        raise MeminitError("who sends and signs off the series? --from 'Name <you@example.org>' "
                           "(or git config user.name and user.email)")
    if not mailable(_address(sender)) or "<" not in sender:
        raise MeminitError(f"--from {sender!r}: not 'Name <address>' with an address one can mail")
    return sender


def prepare_dir(out_dir: Path) -> None:
    """out_dir empty or made by us (MARKER): then our old mail goes; anything else is refused."""
    if out_dir.exists() and any(out_dir.iterdir()) and not (out_dir / MARKER).exists():
        raise MeminitError(f"{out_dir} has files meminit did not write: choose an empty or new directory")
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in [*out_dir.glob("[0-9][0-9][0-9][0-9]-*.patch"), out_dir / MBOX_NAME]:
        old.unlink(missing_ok=True)
    (out_dir / MARKER).write_text("mail written by meminit export --mbox; the next export replaces it\n")


def write(tree: Path, out_dir: Path, cover_subject: str, cover_blurb: str, sender: str,
          subject_prefix: str = "RFC PATCH", changelog: Path | None = None,
          commits: tuple[str, str] = (source.BASE_TAG, "HEAD")) -> Mail:
    """format-patch `commits` (after the first up to the second; base..HEAD by default) of
    `tree` into out_dir as mail from `sender`, then one mbox of it. The base-commit is `base`
    whatever the range: a part mailed on others (an RFC on the core) lists them as
    prerequisite-patch-ids, as b4 does."""
    sender = check_sender(sender)
    out_dir = out_dir.resolve()   # format-patch runs in the tree
    start, end = commits
    subjects = source.git(tree, "log", "--reverse", "--format=%s", f"{start}..{end}").splitlines()
    if not subjects:
        raise MeminitError(f"{tree} has no commits on {source.BASE_TAG}: nothing to mail")
    # one part of the series: the blocks of the others are theirs (the repository's test
    # checks the changelog against every part)
    changes = changelog_for(subjects, read_changelog(changelog or CHANGELOG), whole=False)
    prepare_dir(out_dir)
    # the sender's address in the Message-Ids (format-patch takes the committer's)
    written = source.git(tree, "-c", f"user.email={_address(sender)}", "format-patch", "--cover-letter",
                         f"--base={source.BASE_TAG}", "--thread=shallow", f"--subject-prefix={subject_prefix}",
                         "--abbrev=12", "--no-signature", "-o", str(out_dir), f"{start}..{end}")
    files = [Path(line) for line in written.splitlines() if line.strip()]
    cover, patches = files[0], files[1:]
    if len(patches) != len(subjects):
        raise MeminitError(f"git format-patch wrote {len(patches)} patches for {len(subjects)} commits")
    everyone: list[Recipients] = []
    for patch, subject in zip(patches, subjects):
        text = patch.read_text()
        try:
            author = header_value(text, "From")
            who = recipients(tree, patch, author)
            text = with_changelog(as_sender(text, author, sender), changes[subject])
        except MeminitError as error:
            raise MeminitError(f"{patch}: {error}") from error
        everyone.append(who)
        patch.write_text(with_recipients(text, who))
    cover_text = with_sender(with_cover(cover.read_text(), cover_subject, cover_blurb), sender)
    cover.write_text(utf8_declared(folded_subject(with_recipients(cover_text, union(everyone)))))
    mbox = out_dir / MBOX_NAME
    mbox.write_text("\n".join(f.read_text() for f in files))
    return Mail(cover=cover, patches=patches, mbox=mbox, commits=commits)


def union(each: list[Recipients]) -> Recipients:
    """Everyone once (by address), To before Cc: the cover letter's recipients."""
    to: dict[str, str] = {}
    cc: dict[str, str] = {}
    for who in each:
        for person in who.to:
            to.setdefault(_address(person), person)
    for who in each:
        for person in who.cc:
            if _address(person) not in to:
                cc.setdefault(_address(person), person)
    return Recipients(tuple(to.values()), tuple(cc.values()))


def same_series(tree: Path, applied: str, sender: str,
                commits: tuple[str, str] = (source.BASE_TAG, "HEAD")) -> str | None:
    """Why the commits git am made on the first of `commits` differ from those up to the
    second signed off by `sender` (their tree, or a message: the changelog leaking into a
    commit), or None."""
    start, end = commits
    if source.git(tree, "rev-parse", f"{applied}^{{tree}}") != source.git(tree, "rev-parse", f"{end}^{{tree}}"):
        return "the applied series does not end at the series' tree"
    mailed = [m.strip() for m in source.git(tree, "log", "--reverse", "--format=%x00%B",
                                            f"{start}..{applied}").split("\x00")[1:]]
    expected = []
    for entry in source.git(tree, "log", "--reverse", "--format=%x00%an <%ae>%x01%B",
                            f"{start}..{end}").split("\x00")[1:]:
        author, _, message = entry.partition("\x01")
        expected.append(signed_off_by(message, author, sender).strip())
    if mailed != expected:
        return "the applied commits' messages differ from the series' (changelog below '---' kept?)"
    return None


def apply_check(tree: Path, mail: Mail, scratch: Path) -> str:
    """git am the mbox onto what it was written on (the base, or the parts before it) in a
    scratch worktree; the commit it ends at (kept in the tree's object store after the
    worktree goes).

    The cover letter has no diff: git am stops on it, and is told to skip it, as b4 would."""
    if scratch.exists():
        source.git(tree, "worktree", "remove", "--force", str(scratch), check=False)
    source.git(tree, "worktree", "add", "-q", "--detach", str(scratch), mail.commits[0])
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
