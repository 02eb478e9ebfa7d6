import dataclasses
import os
import re
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

from conftest import git_repo
from meminit.core import kernels
from meminit.kernel import source
from meminit.core.errors import MeminitError

IDENT = ["-c", "user.name=t", "-c", "user.email=t@t"]


def commit_change(repo: Path, old: str, new: str, subject: str) -> None:
    f = repo / "file.c"
    f.write_text(f.read_text().replace(old, new))
    subprocess.run(["git", "-C", str(repo), *IDENT, "commit", "-q", "-am", subject], check=True)


def test_read_series_follows_series_file_order(tmp_path):
    for name in ("0001-a.patch", "0002-b.patch"):
        (tmp_path / name).write_text("x")
    (tmp_path / "series").write_text("# order\n0002-b.patch\n\n0001-a.patch\n")
    assert [p.name for p in source.read_series(tmp_path)] == ["0002-b.patch", "0001-a.patch"]


def test_read_series_rejects_missing_and_unlisted(tmp_path):
    (tmp_path / "0001-a.patch").write_text("x")
    (tmp_path / "series").write_text("0001-a.patch\n0002-gone.patch\n")
    with pytest.raises(MeminitError, match="0002-gone.patch"):
        source.read_series(tmp_path)
    (tmp_path / "series").write_text("")
    with pytest.raises(MeminitError, match="not listed.*0001-a.patch"):
        source.read_series(tmp_path)


def parts_root(tmp_path: Path, *names: str) -> Path:
    """A patches/VERSION/ of the given parts, empty."""
    root = tmp_path / "patches"
    for name in names:
        (root / name).mkdir(parents=True)
    (root / "series").write_text("".join(f"{n}\n" for n in names))
    return root


def test_export_then_apply_round_trip(tmp_path):
    repo = git_repo(tmp_path / "repo")
    source.apply_series(repo, [])
    commit_change(repo, "line 3\n", "line three\n", "first change")
    commit_change(repo, "line 15\n", "line fifteen\n", "second change")
    root = parts_root(tmp_path, "core")
    written = source.export_series(repo, root)
    assert [p.name for p in written] == ["0001-first-change.patch", "0002-second-change.patch"]
    assert (root / "core" / "series").read_text().split() == [p.name for p in written]
    assert "From 0000000000000000000000000000000000000000" in written[0].read_text()
    # the same commits export the same bytes from any tree: a tiny one here, the
    # kernel's (where git's default abbreviation is longer) in work/linux
    assert re.search(r"^index [0-9a-f]{12}\.\.[0-9a-f]{12} 100644$", written[0].read_text(), re.M)
    expected = (repo / "file.c").read_text()
    source.apply_series(repo, source.read_series(root / "core"))
    assert (repo / "file.c").read_text() == expected
    assert source.patch_ids(repo, "base..HEAD") == source.file_patch_ids(written)


def test_export_writes_each_commit_back_to_its_part(tmp_path):
    repo = git_repo(tmp_path / "repo")
    source.apply_series(repo, [])
    commit_change(repo, "line 3\n", "line three\n", "core change")
    commit_change(repo, "line 9\n", "line nine\n", "rfc change")
    commit_change(repo, "line 15\n", "line fifteen\n", "test hook")
    root = parts_root(tmp_path, "core", "rfc/extra", "test-only")
    (root / "core" / "stale.patch").write_text("gone after the export")
    # test-only as filed from the default stack (a comment in its series shows it untouched)
    source.git(repo, "format-patch", "-q", "-o", str(root / "test-only"), "-1", "HEAD")
    (root / "test-only" / "series").write_text("# as filed\n0001-test-hook.patch\n")
    source._record_parts(repo, ["core", "rfc/extra", "test-only"])
    source.export_series(repo, root)
    assert [p.name for p in source.read_series(root / "rfc/extra")] == ["0001-rfc-change.patch"]
    assert not (root / "core" / "stale.patch").exists()
    # a part after an RFC is left as filed, with the default stack's context ...
    assert (root / "test-only" / "series").read_text().startswith("# as filed\n")
    # ... and a change to it there refused, not written with the RFC's context
    commit_change(repo, "line 16\n", "line sixteen\n", "another hook")
    assert source.part_range(repo, "rfc/extra")[1] == source.git(repo, "rev-parse", "HEAD~2").strip()
    with pytest.raises(MeminitError, match="test-only changed in a tree that carries RFCs"):
        source.export_series(repo, root)
    # the default stack leaves the RFC out, and applies and records without it
    stack = source.parts.read_stack(root)
    source.apply_series(repo, [p for _, ps in stack for p in ps], [part.name for part, ps in stack for _ in ps])
    assert [n for n, _, _ in source.recorded_parts(repo)] == ["core", "test-only"]
    assert "line nine" not in (repo / "file.c").read_text()
    assert source.tree_parts(repo) == ["core", "test-only"]
    # there, a new commit joins the part of the commit before it
    commit_change(repo, "line 16\n", "line sixteen\n", "another hook")
    source.export_series(repo, root)
    assert [p.name for p in source.read_series(root / "test-only")] == ["0001-test-hook.patch",
                                                                       "0002-another-hook.patch"]


def _reword(repo: Path, rev: str, subject: str) -> None:
    """Rewrite one commit's subject (an interactive rebase's reword)."""
    env = dict(os.environ, GIT_SEQUENCE_EDITOR=f"sed -i '1s/^pick/reword/'",
               GIT_EDITOR=f"sed -i '1s/.*/{subject}/'")
    subprocess.run(["git", "-C", str(repo), *IDENT, "rebase", "-q", "-i", f"{rev}^"], check=True, env=env,
                   capture_output=True)


def test_a_reworded_or_dropped_part_stays_where_it_belongs(tmp_path):
    repo = git_repo(tmp_path / "repo")
    source.apply_series(repo, [])
    for n, subject in ((3, "core change"), (9, "rfc change"), (15, "test hook")):
        commit_change(repo, f"line {n}\n", f"line {n} changed\n", subject)
    root = parts_root(tmp_path, "core", "rfc/extra", "test-only")
    source._record_parts(repo, ["core", "rfc/extra", "test-only"])
    source.export_series(repo, root)
    # the first (only) commit of a part reworded: its patch-id keeps it in that part
    _reword(repo, "HEAD~1", "rfc change, reworded")
    source.export_series(repo, root)
    assert [p.name for p in source.read_series(root / "rfc/extra")] == ["0001-rfc-change-reworded.patch"]
    assert len(source.read_series(root / "core")) == 1
    # a part whose commits are gone is emptied, not left to come back on the next apply
    subprocess.run(["git", "-C", str(repo), *IDENT, "rebase", "-q", "--onto", "HEAD~2", "HEAD~1"], check=True,
                   capture_output=True)
    source.export_series(repo, root)
    assert source.read_series(root / "rfc/extra") == []
    assert [p.name for p in source.read_series(root / "test-only")] == ["0001-test-hook.patch"]


def exported_parts(tmp_path: Path, changes: list[tuple[int, str, str]]) -> tuple[Path, Path]:
    """A tiny tree with one commit per (line, subject, part) on base, exported to those parts
    (in that order): the tree and its patches/VERSION/."""
    repo = git_repo(tmp_path / "repo")
    source.apply_series(repo, [])
    for line, subject, _ in changes:
        commit_change(repo, f"line {line}\n", f"line {line} changed\n", subject)
    names = [part for _, _, part in changes]
    root = parts_root(tmp_path, *dict.fromkeys(names))
    source._record_parts(repo, names)
    source.export_series(repo, root)
    return repo, root


def test_a_tree_made_before_the_parts_takes_them_from_the_files(tmp_path):
    repo, root = exported_parts(tmp_path, [(3, "core change", "core"), (15, "test hook", "test-only")])
    source._parts_record(repo).unlink()
    commit_change(repo, "line 16\n", "line sixteen\n", "my own work")
    source.export_series(repo, root)
    assert [p.name for p in source.read_series(root / "test-only")] == ["0001-test-hook.patch",
                                                                       "0002-my-own-work.patch"]


def test_failing_patch_names_patch_and_rejected_hunk(tmp_path):
    repo = git_repo(tmp_path / "repo")
    source.apply_series(repo, [])
    commit_change(repo, "line 10\n", "line ten\n", "change ten")
    root = parts_root(tmp_path, "core")
    source.export_series(repo, root)
    # Make the base disagree with the patch's context so it cannot apply.
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", "base"], check=True)
    (repo / "file.c").write_text((repo / "file.c").read_text().replace("line 10\n", "line X\n"))
    subprocess.run(["git", "-C", str(repo), *IDENT, "commit", "-q", "-am", "moved base"], check=True)
    subprocess.run(["git", "-C", str(repo), "tag", "-f", "base"], check=True, capture_output=True)
    with pytest.raises(MeminitError) as err:
        source.apply_series(repo, source.read_series(root / "core"))
    text = str(err.value)
    assert "core/0001-change-ten.patch" in text
    assert "rejected hunk in file.c" in text and "+line ten" in text


def test_rejected_hunk_picks_the_hunk_at_the_reported_line():
    patch = """diff --git a/x.c b/x.c
--- a/x.c
+++ b/x.c
@@ -1,3 +1,3 @@
-a
+b
@@ -40,3 +40,3 @@
-c
+d
diff --git a/y.c b/y.c
@@ -40,1 +40,1 @@
-e
+f
"""
    assert source.rejected_hunk(patch, "x.c", 40) == "@@ -40,3 +40,3 @@\n-c\n+d"
    assert source.rejected_hunk(patch, "y.c", 40) == "@@ -40,1 +40,1 @@\n-e\n+f"


def test_tree_with_unexported_commit_is_not_reset(tmp_path):
    repo = git_repo(tmp_path / "repo")
    source.apply_series(repo, [])
    assert source._tree_has_own_work(repo) is None
    commit_change(repo, "line 2\n", "line two\n", "my work")
    assert "never exported" in source._tree_has_own_work(repo)


@pytest.mark.parametrize("version", sorted(kernels.KERNELS))
def test_repo_series_is_consistent(version):
    """Each kernel's parts are folders listed once, the core first and test-only last; each lists
    every patch of its folder once, in the order of their numbers; the default stack leaves the
    RFCs out."""
    root = kernels.get(version).patches
    found = source.parts.read_parts(root)
    assert found[0].name == "core" and found[-1].name == "test-only"
    folders = {p.parent.relative_to(root).as_posix() for p in root.rglob("*.patch")}
    assert folders == {p.name for p in found}
    for part in found:
        series = source.read_series(root / part.name)
        assert [p.name for p in series] == sorted(p.name for p in (root / part.name).glob("*.patch"))
        assert [int(p.name[:4]) for p in series] == list(range(1, len(series) + 1))
    assert all(p.kind != "rfc" for p, _ in source.parts.read_stack(root))
    assert (root / "changelog").exists()


def test_only_the_kernels_have_series_directories():
    assert sorted(p.name for p in source.paths.PATCHES.iterdir()) == sorted(kernels.KERNELS)


def test_added_lines_and_w1_warnings_on_them(tmp_path):
    from meminit.kernel import checks

    repo = git_repo(tmp_path / "repo")
    commit_change(repo, "line 5\n", "line 5\nnew a\nnew b\n", "add two lines")
    added = checks.added_lines(repo, "base..HEAD")
    assert added == {"file.c": {6, 7}}
    log = ("../../linux/file.c:6:3: warning: unused variable 'x' [-Wunused-variable]\n"
           "../../linux/file.c:2:1: warning: old code warns too\n")
    assert checks.new_warnings(log, added) == [log.splitlines()[0]]


def test_touched_objects_are_the_changed_sources_that_still_exist(tmp_path):
    from meminit.kernel import checks

    repo = git_repo(tmp_path / "repo")
    for name in ("gone.c", "entry.S", "header.h", "Kconfig"):
        (repo / name).write_text("x\n")
    subprocess.run(["git", "-C", str(repo), "add", "."], check=True)
    subprocess.run(["git", "-C", str(repo), *IDENT, "commit", "-q", "-m", "add"], check=True)
    subprocess.run(["git", "-C", str(repo), *IDENT, "rm", "-q", "gone.c"], check=True)
    subprocess.run(["git", "-C", str(repo), *IDENT, "commit", "-q", "-m", "rm"], check=True)
    commit_change(repo, "line 5\n", "line five\n", "edit")
    assert checks.touched_objects(repo, "base..HEAD") == ["entry.o", "file.o"]
    assert checks.touched_objects(repo, "base..HEAD~1") == ["entry.o"]


def test_w1_batches_compile_arch_lib_objects_alone_with_one_job():
    from meminit.kernel import checks

    objects = ["arch/x86/lib/clear_page_64.o", "mm/memory.o", "arch/x86/lib/memcpy_nontemporal_64.o",
               "mm/mm_init.o"]
    assert checks.w1_batches(objects, 2) == [
        (["mm/memory.o", "mm/mm_init.o"], 2),
        (["arch/x86/lib/clear_page_64.o", "arch/x86/lib/memcpy_nontemporal_64.o"], 1)]
    assert checks.w1_batches(["mm/memory.o"], 2) == [(["mm/memory.o"], 2)]
    riscv = ["arch/riscv/lib/clear_page.o"]
    assert checks.w1_batches(riscv, 2) == [(riscv, 1)]


def tiny_source_tarball(path: Path, top: str) -> Path:
    src = path.parent / top
    src.mkdir(parents=True)
    (src / "Makefile").write_text("VERSION = 6\n")
    (src / ".gitignore").write_text("/*\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:xz") as tar:
        tar.add(src, arcname=top)
    return path


@pytest.mark.parametrize("linux", [kernels.LTS, kernels.MAINLINE], ids=lambda k: k.version)
def test_the_same_source_package_gives_the_same_base_commit(tmp_path, monkeypatch, linux):
    # the fetched kernel's tarball is under work/; the LTS's where its package puts it
    monkeypatch.setattr(source.paths, "WORK", tmp_path / "work")
    linux = dataclasses.replace(linux, suite=linux.suite or "a-suite")
    tiny_source_tarball(linux.tarball, linux.source_package)
    commits = []
    for machine in ("one", "two"):
        tree = tmp_path / machine / "linux"
        source._unpack("6.12.117-1~deb12u1", tree, linux)
        assert source.git(tree, "show", "HEAD:Makefile") == "VERSION = 6\n"
        commits.append(source.git(tree, "rev-parse", source.BASE_TAG).strip())
        assert source.unreproducible_base(tree, linux) is None
        time.sleep(1.1)   # a commit dated now would differ by now
    assert commits[0] == commits[1]


def test_a_base_dated_when_it_was_made_is_named(tmp_path):
    repo = git_repo(tmp_path / "repo")
    assert "not 2024-11-17T00:00:00Z" in source.unreproducible_base(repo)


def test_a_tree_without_a_record_keeps_the_parts_it_does_not_carry(tmp_path):
    repo, root = exported_parts(tmp_path, [(3, "core change", "core"), (9, "rfc change", "rfc/extra")])
    # the default stack applied, then its record lost: the RFC's files must stay
    source.apply_series(repo, source.read_series(root / "core"))
    source._parts_record(repo).unlink()
    source.export_series(repo, root)
    assert [p.name for p in source.read_series(root / "rfc/extra")] == ["0001-rfc-change.patch"]


def test_a_stack_is_checked_in_scratch_and_the_tree_keeps_its_checkout(tmp_path):
    repo = git_repo(tmp_path / "repo")
    source.apply_series(repo, [])
    commit_change(repo, "line 10\n", "line ten\n", "change ten")
    root = parts_root(tmp_path, "core")
    patches = source.export_series(repo, root)
    # the tree back on base, with a file of its own: neither is touched by the check
    subprocess.run(["git", "-C", str(repo), "reset", "-q", "--hard", "base"], check=True)
    (repo / "mine.txt").write_text("kept\n")
    head = source.git(repo, "rev-parse", "HEAD")
    tip = source.applied_in_scratch(repo, patches)
    assert source.patch_ids(repo, f"base..{tip}") == source.file_patch_ids(patches)
    assert source.git(repo, "rev-parse", "HEAD") == head and "line 10\n" in (repo / "file.c").read_text()
    assert (repo / "mine.txt").read_text() == "kept\n"
    # a second patch made on another base does not apply: named, and no scratch left behind
    other = tmp_path / "0002-other.patch"
    other.write_text(patches[0].read_text().replace("-line 10\n", "-line 99\n"))
    with pytest.raises(MeminitError, match="0002-other.patch does not apply"):
        source.applied_in_scratch(repo, [patches[0], other])
    assert not repo.with_name(repo.name + ".applying").exists()


def test_export_refuses_a_file_no_commit_holds(tmp_path):
    """Debian's .gitignore (`/*`) hides every new file from `git add`: a patch that adds a
    source file would export without it, and build only where the file still lies around."""
    repo = git_repo(tmp_path / "repo")
    (repo / ".gitignore").write_text("/*\n")
    subprocess.run(["git", "-C", str(repo), "add", "-f", ".gitignore"], check=True)
    subprocess.run(["git", "-C", str(repo), *IDENT, "commit", "-q", "-m", "ignore all"], check=True)
    subprocess.run(["git", "-C", str(repo), "tag", "-f", "base"], check=True, capture_output=True)
    source.apply_series(repo, [])
    (repo / "new.c").write_text("int new;\n")
    commit_change(repo, "line 3\n", "line three\n", "use new.c")
    root = parts_root(tmp_path, "core")
    with pytest.raises(MeminitError, match=r"files no commit holds \(new\.c\).*git add -f"):
        source.export_series(repo, root)
    subprocess.run(["git", "-C", str(repo), "add", "-f", "new.c"], check=True)
    subprocess.run(["git", "-C", str(repo), *IDENT, "commit", "-q", "--amend", "--no-edit"], check=True)
    written = source.export_series(repo, root)
    assert "new file mode" in written[0].read_text()
