"""`meminit export --mbox`: the series as mail. Offline on a tiny tree with a fake
get_maintainer.pl; the kernel test mails the real series and checks it with checkpatch
and git am."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from conftest import git_repo
from meminit.bench import auto_replay, recorded_runs, stream_rules
from meminit.core import kernels, paths
from meminit.kernel import mail, own_tree, parts, source
from meminit.guest import selftests
from meminit.commands import cover_letter
from meminit.commands import kernel as kernel_commands
from meminit.core.errors import MeminitError

IDENT = ["-c", "user.name=meminit developers", "-c", "user.email=meminit@localhost"]
SENDER = "Sam Sender <sam@example.org>"
GET_MAINTAINER = """#!/usr/bin/perl
print "meminit developers <meminit\\@localhost> (maintainer:OURS)\\n";
print "Mo Maintainer <mo\\@example.org> (maintainer:MEMORY MANAGEMENT)\\n";
print "Sue Supporter <sue\\@example.org> (supporter:LIBRARY CODE)\\n";
print "Rae Reviewer <rae\\@example.org> (reviewer:MEMORY MANAGEMENT)\\n";
print "linux-mm\\@kvack.org (open list:MEMORY MANAGEMENT)\\n";
print "Mo Maintainer <MO\\@example.org> (maintainer:ANOTHER)\\n";
"""


def test_get_maintainer_those_who_take_patches_go_to_to_the_rest_to_cc_never_the_author():
    who = mail.parse_get_maintainer(
        "Ann Author <ann@example.org> (maintainer:OURS)\n"
        "Mo Maintainer <mo@example.org> (maintainer:MM)\n"
        "Kees Cook <kees@kernel.org> (supporter:GENERIC STRING LIBRARY)\n"
        "Odd Fixer <odd@example.org> (odd fixer:OLD DRIVER)\n"
        "\"H. Peter Anvin\" <hpa@zytor.com> (reviewer:X86)\n"
        "x86@kernel.org (maintainer:X86)\n"
        "meminit developers <meminit@localhost> (maintainer:MEMCPY_NONTEMPORAL)\n"
        "linux-mm@kvack.org (open list:MM)\n"
        "Mo Maintainer <MO@Example.org> (maintainer:OTHER)\n", "Ann Author <ANN@example.org>")
    assert who.to == ("Mo Maintainer <mo@example.org>", "Kees Cook <kees@kernel.org>",
                      "Odd Fixer <odd@example.org>", "x86@kernel.org")
    assert who.cc == ("\"H. Peter Anvin\" <hpa@zytor.com>", "linux-mm@kvack.org")


def test_the_sender_must_be_someone_one_can_mail():
    for bad in ("", "meminit developers <meminit@localhost>", "sam@example.org", "Sam <sam>"):
        with pytest.raises(MeminitError, match="--from|who sends"):
            mail.check_sender(bad)
    assert mail.check_sender(SENDER) == SENDER


def test_long_recipient_lists_are_folded_and_read_back_whole():
    addresses = tuple(f"Person Number{i} <person{i}@example.org>" for i in range(6))
    text = mail.with_recipients("From: a\nSubject: s\n\nbody\n", mail.Recipients(addresses, ()))
    assert all(len(line) <= mail.HEADER_WIDTH for line in text.splitlines())
    assert mail.header_value(text, "To") == ", ".join(addresses)
    assert text.endswith("\n\nbody\n")


def test_changelog_blocks_and_their_mistakes(tmp_path):
    log = tmp_path / "changelog"
    log.write_text("# comment\n\nmm: one\n- first\n  continued\n\nmm: two\n- no changes\n")
    blocks = mail.read_changelog(log)
    assert blocks == {"mm: one": ["- first", "  continued"], "mm: two": ["- no changes"]}
    assert mail.changelog_for(["mm: one", "mm: two"], blocks) == blocks
    with pytest.raises(MeminitError, match="no changelog for 'mm: three'.*changelog for no patch: 'mm: two'"):
        mail.changelog_for(["mm: one", "mm: three"], blocks)
    log.write_text("mm: one\n\nmm: two\n- x\n")
    with pytest.raises(MeminitError, match="no changelog for 'mm: one'"):
        mail.changelog_for(["mm: one", "mm: two"], mail.read_changelog(log))
    log.write_text("- orphan\n")
    with pytest.raises(MeminitError, match="under no patch subject"):
        mail.read_changelog(log)
    log.write_text("mm: one\n- a\n\nmm: one\n- b\n")
    with pytest.raises(MeminitError, match="second block"):
        mail.read_changelog(log)


def all_patches() -> list[Path]:
    """Every patch of every part of the default kernel's series."""
    root = kernels.DEFAULT.patches
    return [p for part in parts.read_parts(root) for p in source.read_series(root / part.name)]


def series_subjects() -> list[str]:
    subjects = []
    for patch in all_patches():
        subject = mail.header_value(patch.read_text(), "Subject")
        subjects.append(re.sub(r"^\[PATCH[^]]*\] ", "", subject))
    return subjects


def test_the_repo_changelog_has_one_block_per_patch_of_the_series():
    assert len(series_subjects()) == len(all_patches()) > 0
    mail.changelog_for(series_subjects(), mail.read_changelog())


@pytest.fixture
def tiny_series(tmp_path, monkeypatch) -> Path:
    """Two commits on `base` in a tiny tree with its own scripts/get_maintainer.pl."""
    tree = git_repo(tmp_path / "linux")
    (tree / "scripts").mkdir()
    (tree / "scripts" / "get_maintainer.pl").write_text(GET_MAINTAINER)
    subprocess.run(["git", "-C", str(tree), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(tree), *IDENT, "commit", "-q", "--amend", "--no-edit"], check=True)
    subprocess.run(["git", "-C", str(tree), "tag", "-f", "base"], check=True, capture_output=True)
    for n, subject in ((3, "mm: change three"), (15, "mm: change fifteen")):
        f = tree / "file.c"
        f.write_text(f.read_text().replace(f"line {n}\n", f"line {n} changed\n"))
        body = f"{subject}\n\nWhy it changes.\n\nSigned-off-by: meminit developers <meminit@localhost>"
        subprocess.run(["git", "-C", str(tree), *IDENT, "commit", "-q", "-am", body], check=True)
    changelog = tmp_path / "changelog"
    changelog.write_text("mm: change three\n- reworded\n\nmm: change fifteen\n- none\n")
    monkeypatch.setattr(mail, "CHANGELOG", changelog)
    monkeypatch.setattr(mail.read_changelog, "__defaults__", (changelog,))
    return tree


def test_the_mail_applies_onto_the_base_without_its_changelog(tiny_series, tmp_path):
    tree = tiny_series
    written = mail.write(tree, tmp_path / "mail", "mm: tiny", "What and why, → in UTF-8.\n", SENDER)
    assert [p.name for p in written.patches] == ["0001-mm-change-three.patch", "0002-mm-change-fifteen.patch"]
    cover = written.cover.read_text()
    assert mail.header_value(cover, "Subject") == "[RFC PATCH 0/2] mm: tiny"
    assert mail.header_value(cover, "From") == SENDER
    assert "charset=UTF-8" in mail.header_value(cover, "Content-Type")
    assert mail.header_value(cover, "To") == "Mo Maintainer <mo@example.org>, Sue Supporter <sue@example.org>"
    assert "What and why" in cover and f"base-commit: {source.git(tree, 'rev-parse', 'base').strip()}" in cover
    first, second = (p.read_text() for p in written.patches)
    assert mail.header_value(first, "From") == SENDER
    assert "Message-Id: <" in first and "@localhost" not in first
    assert mail.header_value(first, "Cc") == "Rae Reviewer <rae@example.org>, linux-mm@kvack.org"
    assert f"\nSigned-off-by: {SENDER}\n---\n{mail.CHANGELOG_HEADING}\n- reworded\n\n file.c | 2 +-" in first
    assert "\n---\n file.c | 2 +-" in second     # "- none": no changelog
    applied = mail.apply_check(tree, written, tmp_path / "am")
    assert not (tmp_path / "am").exists()
    # git am dropped the changelog: the commits it made are the series, signed off by the sender
    assert mail.same_series(tree, applied, SENDER) is None
    assert "reworded" not in source.git(tree, "log", "--format=%B", f"base..{applied}")
    assert source.git(tree, "log", "-1", "--format=%an <%ae>", applied).strip() == SENDER
    assert source.git(tree, "rev-list", "--count", f"base..{applied}").strip() == "2"


def test_a_changelog_above_the_dashes_would_be_caught(tiny_series, tmp_path, monkeypatch):
    monkeypatch.setattr(mail, "with_changelog", lambda text, changes: text.replace(
        "\n\nSigned-off-by", "\n\n" + "\n".join(changes) + "\n\nSigned-off-by", 1))
    written = mail.write(tiny_series, tmp_path / "mail", "mm: tiny", "blurb\n", SENDER)
    applied = mail.apply_check(tiny_series, written, tmp_path / "am")
    assert "messages differ" in mail.same_series(tiny_series, applied, SENDER)


def test_a_mbox_that_does_not_apply_is_reported(tiny_series, tmp_path):
    written = mail.write(tiny_series, tmp_path / "mail", "mm: tiny", "blurb\n", SENDER)
    written.mbox.write_text(written.mbox.read_text().replace("+line 3 changed", "+line 3 changed\n+extra"))
    with pytest.raises(MeminitError, match="git am .* failed"):
        mail.apply_check(tiny_series, written, tmp_path / "am")


def test_the_out_dir_is_ours_or_empty_and_relative_to_where_we_are(tiny_series, tmp_path, monkeypatch):
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "important-fix.patch").write_text("keep me")
    with pytest.raises(MeminitError, match="files meminit did not write"):
        mail.write(tiny_series, theirs, "mm: tiny", "blurb\n", SENDER)
    assert (theirs / "important-fix.patch").read_text() == "keep me"
    monkeypatch.chdir(tmp_path)
    first = mail.write(tiny_series, Path("out"), "mm: tiny", "blurb\n", SENDER)
    assert first.mbox == tmp_path / "out" / mail.MBOX_NAME and not (tiny_series / "out").exists()
    again = mail.write(tiny_series, Path("out"), "mm: tiny v2", "blurb\n", SENDER)   # ours: replaced
    assert "mm: tiny v2" in again.cover.read_text()


def test_mail_edits_say_what_is_missing():
    with pytest.raises(MeminitError, match="'---' line"):
        mail.with_changelog("From: a\nSubject: s\n\nno dashes\n", ["- x"])
    with pytest.raises(MeminitError, match="BLURB"):
        mail.with_cover("Subject: *** SUBJECT HERE ***\n\nno blurb\n", "s", "b")
    long_subject = "Subject: [RFC PATCH 00/17] " + "word " * 30 + "\nFrom: a\n\nbody\n"
    folded = mail.folded_subject(long_subject)
    assert all(len(line) <= mail.HEADER_WIDTH for line in folded.splitlines())
    assert mail.header_value(folded, "Subject") == mail.header_value(long_subject, "Subject")


@pytest.mark.parametrize("linux", [kernels.LTS, kernels.MAINLINE], ids=["6.12", "7.3"])
def test_the_core_cover_letter_carries_the_rule_table_the_links_and_the_base(linux):
    base = f"{linux.version}.999"   # export_mail fills in the tree's own (test_the_core_is_mailed...)
    subject, blurb = cover_letter.core_cover(linux, base)
    flat = " ".join(blurb.split())
    assert cover_letter.RULE_TABLE not in blurb and cover_letter.BASE_RELEASE not in blurb
    assert stream_rules.cover_table(recorded_runs.recorded_runs(), auto_replay.Policy()) in blurb
    # Li Zhe's threads, credited
    for msgid in ("20260515082045.63029-1", "20260521040124.10608-1", "20260527033636.28231-1",
                  "20260603080152.64728-1", "20260701090553.62691-1"):   # v1-v5
        assert f"Link: https://lore.kernel.org/all/{msgid}-lizhe.67@bytedance.com/" in blurb
    assert "Li Zhe" in flat and "memcpy_flushcache()" in flat
    assert f"against Debian's {base} ({linux.source_package})" in flat
    assert ("backport" in subject) == (linux == kernels.LTS)
    assert max(len(line) for line in blurb.splitlines() if not line.startswith("Link: ")) <= cover_letter.WIDTH
    # what the harness checks, from its code: the long guests ported to the kernel
    assert ("soak of" in flat) == ("soak" in linux.long_guests)
    assert (f"By hand: all {len(selftests.of(linux))} on base and series" in flat) == (
        "selftests" in linux.long_guests)
    # "every CI run" only for a kernel whose kunit group .ci/run runs
    ci = (paths.REPO / ".ci" / "run").read_text()
    runs_kunit = re.search(r"^\S.*\./meminit check-configs" + ("$" if linux == kernels.LTS
                                                                 else f" --linux {linux.version}$"),
                           ci, re.MULTILINE) is not None
    assert runs_kunit == linux.ci_kunit
    assert ("Every CI run: KUnit through kunit.py on arm64" in flat) == linux.ci_kunit
    assert ("Before a submission: KUnit through kunit.py on arm64" in flat) == (not linux.ci_kunit)
    assert f"preempt={linux.other_preempt}" in flat


def test_mailing_the_series_passes_checkpatch_and_git_am(kernel_trees, tmp_path):
    """The series of the kernel under test (`meminit test --linux`) as mail: [PATCH] on 7.3,
    [RFC PATCH] on the 6.12 backport; export_mail itself runs checkpatch and git am."""
    linux = kernel_trees.linux
    assert kernel_trees.series == linux.tree
    if source.unreproducible_base(linux.tree, linux):
        pytest.skip(f"{linux.tree} was unpacked before the base commit's date was fixed")
    written = kernel_commands.export_mail(tmp_path / "mail", SENDER, linux=linux)
    # the core only: no RFC, topic or test-only patch goes out with it
    assert len(written.patches) == len(source.read_series(linux.patches / "core"))
    assert not any("TEST ONLY" in p.read_text() for p in written.patches)
    cover = written.cover.read_text()
    assert "linux-mm@kvack.org" in mail.header_value(cover, "Cc")
    # the point release is the unpacked tree's own, whatever Debian ships today
    release = own_tree.makefile_release(linux.tree, source.BASE_TAG)
    assert re.fullmatch(re.escape(linux.version) + r"\.\d+", release)
    assert f"against Debian's {release} ({linux.source_package})" in " ".join(cover.split())
    count = len(written.patches)   # format-patch pads the cover's number to the count's width
    assert mail.header_value(cover, "Subject").startswith(f"[{linux.mail_prefix} {'0' * len(str(count))}/{count}] "
                                                         f"{cover_letter.core_cover(linux, release)[0]}")
    assert all(SENDER in p.read_text() for p in written.patches)


def test_a_topic_is_mailed_apart_on_the_core(kernel_trees, tmp_path):
    """The kernel's topic part (6.12's clearing backport, 7.3's clearing tests) mailed alone:
    git am onto the parts before it gives it, its base-commit is the base and the commits
    between are prerequisites."""
    linux = kernel_trees.linux
    if source.unreproducible_base(linux.tree, linux):
        pytest.skip(f"{linux.tree} was unpacked before the base commit's date was fixed")
    if linux.rfcs:
        pytest.skip(f"the tree carries {', '.join(linux.rfcs)}: a topic is mailed from the default stack")
    topic, = (p for p in parts.read_parts(linux.patches) if p.kind == "topic")
    written = kernel_commands.export_mail(tmp_path / "mail", SENDER, linux=linux, part=topic)
    assert len(written.patches) == len(source.read_series(linux.patches / topic.name))
    cover = written.cover.read_text()
    assert f"base-commit: {source.git(linux.tree, 'rev-parse', 'base').strip()}" in cover
    assert cover.count("prerequisite-patch-id:") == len(source.read_series(linux.patches / "core"))


def test_a_part_mailed_apart_lists_the_parts_before_it_as_prerequisites(tiny_series, tmp_path):
    tree = tiny_series
    first = source.git(tree, "rev-parse", "HEAD~1").strip()
    written = mail.write(tree, tmp_path / "mail", "mm: the second", "Only the second.\n", SENDER,
                         commits=(first, "HEAD"))
    assert [p.name for p in written.patches] == ["0001-mm-change-fifteen.patch"]
    cover = written.cover.read_text()
    assert f"base-commit: {source.git(tree, 'rev-parse', 'base').strip()}" in cover
    assert cover.count("prerequisite-patch-id:") == 1
    applied = mail.apply_check(tree, written, tmp_path / "scratch")
    assert mail.same_series(tree, applied, SENDER, (first, "HEAD")) is None
