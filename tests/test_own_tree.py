"""`run --tree DIR --base REV [--series REV]` (kernel/own_tree.py): the user's tree is checked out
into clones of ours, never written to, and every input a user can get wrong is refused before
anything is built."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from meminit import cli
from meminit.core import kernels
from meminit.core.errors import MeminitError
from meminit.kernel import build, own_tree


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          check=True, capture_output=True, text=True).stdout


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A kernel-shaped git tree of 7.1 with one commit on top of its base, and work/own in tmp."""
    monkeypatch.setattr(own_tree, "OWN_DIR", tmp_path / "work" / "own")
    repo = tmp_path / "linux"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "master")
    (repo / "Makefile").write_text("# SPDX\nVERSION = 7\nPATCHLEVEL = 1\nSUBLEVEL = 0\nEXTRAVERSION = -rc6\n")
    (repo / "mm.c").write_text("int x;\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    (repo / "mm.c").write_text("int x = 1;\n")
    _git(repo, "commit", "-q", "-am", "series")
    return repo


def test_nearest_linux_prefers_the_same_major():
    assert own_tree.nearest_linux("7.1") is kernels.MAINLINE
    assert own_tree.nearest_linux("7.3") is kernels.MAINLINE
    assert own_tree.nearest_linux("8.0") is kernels.MAINLINE
    assert own_tree.nearest_linux("6.18") is kernels.LTS
    assert own_tree.nearest_linux("6.1") is kernels.LTS
    assert own_tree.nearest_linux("5.15") is kernels.LTS


def test_prepare_checks_out_both_commits_and_leaves_the_tree_alone(tree: Path):
    before = (_git(tree, "rev-parse", "HEAD"), _git(tree, "worktree", "list"), _git(tree, "status", "--porcelain"))
    got = own_tree.prepare(own_tree.OwnTree(tree, base="HEAD~1"))
    assert got.version == "7.1"
    assert got.base_commit == _git(tree, "rev-parse", "HEAD~1").strip()
    assert got.series_commit == _git(tree, "rev-parse", "HEAD").strip()
    assert (got.trees.base / "mm.c").read_text() == "int x;\n"
    assert (got.trees.series / "mm.c").read_text() == "int x = 1;\n"
    # 7.1 builds with 7.3's config fragments, in a build root of its own
    assert got.trees.linux.version == "7.3"
    assert got.trees.linux.build_root.name == f"build-own-{own_tree.slug(tree)}"
    assert got.trees.linux.build_root != kernels.MAINLINE.build_root
    assert (_git(tree, "rev-parse", "HEAD"), _git(tree, "worktree", "list"),
            _git(tree, "status", "--porcelain")) == before
    prov = got.provenance()
    assert prov["linux"] == "7.1" and prov["config_of"] == "7.3" and prov["tree"] == str(tree)


def test_prepare_follows_a_new_commit_and_honours_linux(tree: Path):
    own_tree.prepare(own_tree.OwnTree(tree, base="HEAD~1"))
    (tree / "mm.c").write_text("int x = 2;\n")
    _git(tree, "commit", "-q", "-am", "series v2")
    got = own_tree.prepare(own_tree.OwnTree(tree, base="HEAD~2", config_of="6.12"))
    assert (got.trees.series / "mm.c").read_text() == "int x = 2;\n"
    assert (got.trees.base / "mm.c").read_text() == "int x;\n"
    assert got.trees.linux.version == "6.12"


@pytest.mark.parametrize("what,own,message", [
    ("no directory", lambda t: own_tree.OwnTree(t / "nope", base="HEAD~1"), "no such directory"),
    ("not git", lambda t: own_tree.OwnTree(t.parent / "work", base="HEAD~1"), "not a git repository"),
    ("bad base", lambda t: own_tree.OwnTree(t, base="v9.9"), "--base v9.9: no such commit"),
    ("bad series", lambda t: own_tree.OwnTree(t, base="HEAD~1", series="nope"), "--series nope: no such commit"),
    ("same commit", lambda t: own_tree.OwnTree(t, base="HEAD", series="master"), "same commit"),
])
def test_prepare_refuses_what_it_cannot_measure(tree: Path, what: str, own, message: str):
    (tree.parent / "work").mkdir(exist_ok=True)
    with pytest.raises(MeminitError, match=message):
        own_tree.prepare(own(tree))
    assert not own_tree.OWN_DIR.exists(), what  # refused before anything was checked out


def test_prepare_refuses_a_tree_that_is_not_a_kernel(tree: Path):
    (tree / "Makefile").write_text("all:\n\ttrue\n")
    _git(tree, "commit", "-q", "-am", "not a kernel")
    with pytest.raises(MeminitError, match="no VERSION and PATCHLEVEL: not a kernel tree"):
        own_tree.prepare(own_tree.OwnTree(tree, base="HEAD~1"))


def test_own_trees_build_base_and_series_only(tree: Path):
    got = own_tree.prepare(own_tree.OwnTree(tree, base="HEAD~1"))
    with pytest.raises(MeminitError, match="choose from base, series .a --tree builds"):
        build.build_trees(["series", "debug"], got.trees, own=True)


@pytest.mark.parametrize("argv,message", [
    (["run", "--base", "v7.1"], "--base names a commit of --tree DIR, which is missing"),
    (["run", "--series", "HEAD"], "--series names a commit of --tree DIR, which is missing"),
    (["run", "--tree", "/tmp"], "--tree DIR needs --base REV"),
    (["boot", "--base", "v7.1"], "--base names a commit of --tree DIR, which is missing"),
    (["boot", "--tree", "/tmp"], "--tree DIR needs --base REV"),
])
def test_run_refuses_tree_options_without_each_other(argv: list[str], message: str, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_an_own_commit_lacking_a_guest_option_is_refused_naming_it(tree: Path, monkeypatch):
    got = own_tree.prepare(own_tree.OwnTree(tree, base="HEAD~1"))
    seen = {}

    def configure(src, out, fragments, optional=None):
        seen["required"], seen["optional"] = fragments, optional
        raise MeminitError("required kernel options were dropped by their dependencies:\n"
                           "  CONFIG_ND_PMEM=y (olddefconfig left it unset)")
    monkeypatch.setattr(build.deps, "ensure", lambda *a, **k: None)
    monkeypatch.setattr(build.kconfig, "configure", configure)
    with pytest.raises(MeminitError, match="the series commit of --tree lacks what meminit's guests "
                                           "need: (.|\n)*CONFIG_ND_PMEM=y"):
        build.build_trees(["series"], got.trees, own=True)
    # required: the base fragments; the series fragment only where the tree has its options
    assert [f.name for f in seen["required"]] == ["meminit.config", "meminit.config"]
    assert [f.name for f in seen["optional"]] == ["series.config", "series.config"]


def test_boot_of_an_own_tree_refuses_debug_and_deb(tree: Path, monkeypatch):
    from meminit.commands import boot
    monkeypatch.setattr(boot.results, "new_run_dir", lambda name: tree.parent / "run")
    own = own_tree.OwnTree(tree, base="HEAD~1")
    with pytest.raises(MeminitError, match="choose from base, series"):
        boot.boot(boot.BootRequest(variant="debug", tree=own))
    with pytest.raises(MeminitError, match="either a kernel of --tree or --deb"):
        boot.boot(boot.BootRequest(deb=tree / "x.deb", tree=own))


def test_a_tree_run_names_its_tree_and_commits_not_a_debian_package():
    from meminit.scenarios import conditions
    result = {"host_cpu": "AMD EPYC", "accel": "tcg", "guest_cpus": 2, "guest_memory": "5G",
              "linux": "7.1", "tree": "/src/linux", "config_of": "7.3", "base_commit": "c61de6d7a2880000",
              "series_commit": "0f931a6876510000"}
    line = conditions(result)
    assert "tree /src/linux (Linux 7.1, config of 7.3), base c61de6d7a288, series 0f931a687651" in line
    assert "None" not in line


def test_the_makefile_gives_version_and_point_release(tree: Path):
    assert own_tree.makefile_version(tree, "HEAD") == "7.1"
    assert own_tree.makefile_release(tree, "HEAD") == "7.1.0"
    (tree / "Makefile").write_text("VERSION = 7\nPATCHLEVEL = 3\n")
    _git(tree, "commit", "-q", "-am", "no sublevel")
    assert own_tree.makefile_version(tree, "HEAD") == "7.3"
    with pytest.raises(MeminitError, match="has no SUBLEVEL"):
        own_tree.makefile_release(tree, "HEAD")
