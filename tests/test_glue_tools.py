"""The glue to the host's tools, offline: apt through deps.ensure, make through build.run_make,
and check-series walking the prefixes of a tiny series with make and checkpatch faked."""

from __future__ import annotations

import fcntl
import os
import shutil
import re
import stat
import subprocess
import threading
from pathlib import Path

import pytest

from conftest import git_repo
from meminit.core import deps, paths
from meminit.kernel import build, checks, kconfig, source
from meminit.core.errors import MeminitError


def fake_tool(bin_dir: Path, name: str, body: str) -> None:
    bin_dir.mkdir(exist_ok=True)
    tool = bin_dir / name
    tool.write_text("#!/bin/sh\n" + body)
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)


# ------------------------------------------------------------------ deps.ensure


@pytest.fixture
def fake_apt(tmp_path, monkeypatch) -> Path:
    """An apt-get that logs its arguments and installs a package by creating /probe/<name>,
    except a package called broken."""
    calls = tmp_path / "apt.log"
    fake_tool(tmp_path / "bin", "apt-get", f"""echo "$*" >> {calls}
pkg=$(eval echo \\${{$#}})
[ "$1" = install ] || exit 0
[ "$pkg" = broken ] && {{ echo "E: Unable to locate package broken" >&2; exit 100; }}
touch {tmp_path}/probe-$pkg
""")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(deps, "_updated", False)
    monkeypatch.setattr(paths, "WORK", tmp_path / "work")
    return calls


def test_ensure_installs_only_what_is_missing_and_updates_once(fake_apt, tmp_path):
    (tmp_path / "probe-here").touch()
    deps.ensure({"here": str(tmp_path / "probe-here")})
    assert not fake_apt.exists()
    deps.ensure({"here": str(tmp_path / "probe-here"), "one": str(tmp_path / "probe-one")})
    deps.ensure({"two": str(tmp_path / "probe-two")})
    assert fake_apt.read_text().splitlines() == [
        "update -q -o DPkg::Lock::Timeout=600",
        "install -y -q --no-install-recommends -o DPkg::Lock::Timeout=600 one",
        "install -y -q --no-install-recommends -o DPkg::Lock::Timeout=600 two"]
    assert (tmp_path / "probe-one").exists() and (tmp_path / "probe-two").exists()


def test_ensure_waits_for_another_meminit_installing_then_finds_its_packages(fake_apt, tmp_path, capsys):
    (tmp_path / "work").mkdir()
    with open(tmp_path / "work" / deps.INSTALL_LOCK, "w") as other:
        fcntl.flock(other, fcntl.LOCK_EX)
        second = threading.Thread(target=deps.ensure, args=({"one": str(tmp_path / "probe-one")},))
        second.start()
        second.join(0.5)
        assert second.is_alive() and not fake_apt.exists()
        (tmp_path / "probe-one").touch()   # what the other command installed
    second.join(5)
    assert not second.is_alive() and not fake_apt.exists()
    assert "waiting for another meminit command of this checkout" in capsys.readouterr().err


def test_ensure_names_the_package_apt_could_not_install(fake_apt, tmp_path):
    with pytest.raises(MeminitError, match="apt-get install broken failed(.|\n)*Unable to locate package"):
        deps.ensure({"broken": str(tmp_path / "probe-broken")})


def test_ensure_without_apt_names_what_is_missing(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(MeminitError, match="missing packages a b and no apt-get"):
        deps.ensure({"a": str(tmp_path / "no-a"), "b": str(tmp_path / "no-b")})


# -------------------------------------------------------------- build.run_make


def test_run_make_logs_counts_and_times_a_build(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(build, "PROGRESS_EVERY_S", 0)
    kernel = build.Kernel("series", tmp_path, tmp_path / "out")
    log = tmp_path / "build.log"
    elapsed = build.run_make(kernel, ["sh", "-c", "echo '  CC mm/a.o'; echo '  AS x.o'; "
                                      "echo '  CC [M]  lib/m.o'; echo '  LD v'"], log, "build series")
    assert elapsed >= 0
    assert log.read_text() == "  CC mm/a.o\n  AS x.o\n  CC [M]  lib/m.o\n  LD v\n"
    progress = [line for line in capsys.readouterr().err.splitlines() if "files compiled" in line]
    # CC, AS and a module's CC, not LD: the lines check-series names objects by
    assert progress[-1].startswith("meminit: build series: 3 files compiled")
    assert build.KBUILD_COMPILED.findall(log.read_text()) == ["mm/a.o", "x.o", "lib/m.o"]


def test_run_make_failure_shows_the_tail_and_the_log(tmp_path):
    kernel = build.Kernel("series", tmp_path, tmp_path / "out")
    log = tmp_path / "build.log"
    expected = r"build series failed after \d+s; last lines:\nmm/a.c:1: error: boom\nfull log: " + re.escape(str(log))
    with pytest.raises(MeminitError, match=expected):
        build.run_make(kernel, ["sh", "-c", "echo 'mm/a.c:1: error: boom'; exit 2"], log, "build series")


# ---------------------------------------------------------- checks.check_series


@pytest.fixture
def tiny_series(tmp_path, monkeypatch) -> dict:
    """A two-patch series in a tiny tree; make and checkpatch are recorded, not run.

    Patch 1 touches mm/a.c, patch 2 touches mm/b.c; make's W=1 output for a prefix is
    whatever `w1_output[index]` holds."""
    tree = git_repo(tmp_path / "linux")
    ident = ["-c", "user.name=t", "-c", "user.email=t@t"]
    for name in ("a", "b"):
        (tree / "mm").mkdir(exist_ok=True)
        (tree / "mm" / f"{name}.c").write_text(f"int {name};\nint {name}2;\n")
        subprocess.run(["git", "-C", str(tree), "add", "-A"], check=True)
        subprocess.run(["git", "-C", str(tree), *ident, "commit", "-q", "-m", f"mm: add {name}"], check=True)
    state: dict = {"made": [], "w1_output": {}, "fail_build": None, "checkpatch": [],
                   "reconfigured": [], "found": []}
    monkeypatch.setattr(source, "prepare_trees", lambda *a, **k: source.Trees(series=tree, base=tmp_path / "base"))
    monkeypatch.setattr(source, "read_series", lambda *a: [Path("0001-a.patch"), Path("0002-b.patch")])
    monkeypatch.setattr(checks, "checkpatch", lambda t, patches: list(state["checkpatch"]))
    monkeypatch.setattr(build, "kernel_for", lambda v, trees: build.Kernel(v, tree, tmp_path / "out"))
    monkeypatch.setattr(kconfig, "configure", lambda src, out, frags: (out.mkdir(exist_ok=True),
                                                                      (out / ".config").write_text("C=y\n")))
    monkeypatch.setattr(kconfig, "reconfigure", lambda src, out, text: state["reconfigured"].append(
        source.git(tree, "log", "-1", "--format=%s").strip()))
    monkeypatch.setattr(kconfig, "forget_configuration", lambda out: None)

    def make(kernel: build.Kernel, cmd: list[str], log: Path, what: str) -> float:
        subject = source.git(tree, "log", "-1", "--format=%s").strip()
        w1 = "W=1" in cmd
        objects = [c for c in cmd if c.endswith(".o")]
        state["made"].append((subject, "W=1" if w1 else "full", objects))
        # which goals were already there (kbuild would decide whether to compile them)
        state["found"].append((subject, [o for o in objects if (kernel.out / o).exists()]))
        for obj in objects:
            (kernel.out / obj).parent.mkdir(parents=True, exist_ok=True)
            (kernel.out / obj).touch()
        index = int(what.split("prefix ")[1].split("/")[0])
        log.write_text(state["w1_output"].get(index, "") if w1 else "")
        if state["fail_build"] == index and not w1:
            raise MeminitError(f"{what} failed")
        return 0.0

    monkeypatch.setattr(build, "run_make", make)
    state["tree"] = tree
    return state


def test_check_series_compiles_each_prefix_touched_files_and_builds_them(tiny_series):
    checks.check_series(jobs=2)
    assert tiny_series["made"] == [
        ("mm: add a", "W=1", ["mm/a.o"]), ("mm: add a", "full", []),
        ("mm: add b", "W=1", ["mm/a.o", "mm/b.o"]), ("mm: add b", "full", [])]
    assert source.git(tiny_series["tree"], "rev-parse", "--abbrev-ref", "HEAD").strip() == "series"


def test_check_series_touched_only_builds_the_last_prefix_alone(tiny_series):
    checks.check_series(jobs=2, touched_only=True)
    assert [(s, kind) for s, kind, _ in tiny_series["made"]] == [
        ("mm: add a", "W=1"), ("mm: add b", "W=1"), ("mm: add b", "full")]


def test_check_series_leaves_an_object_compiled_earlier_in_the_check_to_kbuild(tiny_series):
    """mm/a.o, left by an earlier check, is removed before prefix 1 compiles it; at prefix 2
    the a.o that prefix 1 compiled stays, for kbuild to compile again only if its input
    changed, and the new mm/b.o is compiled."""
    out = tiny_series["tree"].parent / "out"
    (out / "mm").mkdir(parents=True)
    (out / "mm" / "a.o").touch()
    checks.check_series(jobs=2, touched_only=True)
    assert tiny_series["found"] == [("mm: add a", []), ("mm: add b", ["mm/a.o"]),
                                    ("mm: add b", [])]


def test_check_series_configures_again_only_where_a_prefix_changes_a_kconfig_file(tiny_series):
    tree = tiny_series["tree"]
    for name, path in (("c", "mm/c.c"), ("d", "mm/Kconfig.debug"), ("e", "mm/e.c")):
        (tree / path).write_text(f"{name}\n")
        subprocess.run(["git", "-C", str(tree), "add", "-A"], check=True)
        subprocess.run(["git", "-C", str(tree), "-c", "user.name=t", "-c", "user.email=t@t",
                        "commit", "-q", "-m", f"mm: add {name}"], check=True)
    checks.check_series(jobs=2, touched_only=True)
    assert tiny_series["reconfigured"] == ["mm: add a", "mm: add d"]


def test_check_series_fails_on_a_warning_at_an_added_line_only(tiny_series):
    tiny_series["w1_output"] = {1: "mm/a.c:2:5: warning: unused variable 'a2'\n"
                                   "include/linux/mm.h:9:1: warning: old code, not ours\n"}
    with pytest.raises(MeminitError, match=r"prefix 1/2 \(mm: add a\): mm/a.c:2:5: warning") as failure:
        checks.check_series(jobs=2)
    assert "mm.h" not in str(failure.value)


def test_check_series_fails_on_checkpatch_and_returns_the_tree_after_a_failed_build(tiny_series):
    tiny_series["checkpatch"] = ["0002-b.patch:\nWARNING: something"]
    with pytest.raises(MeminitError, match="series check failed:\n0002-b.patch"):
        checks.check_series(jobs=2)
    tiny_series["checkpatch"] = []
    tiny_series["fail_build"] = 1
    with pytest.raises(MeminitError, match="prefix 1/2"):
        checks.check_series(jobs=2)
    tree = tiny_series["tree"]
    assert source.git(tree, "rev-parse", "--abbrev-ref", "HEAD").strip() == "series"
    assert source.git(tree, "log", "-1", "--format=%s").strip() == "mm: add b"


def test_a_kernel_from_another_suite_is_fetched_through_a_private_apt_list(tmp_path, monkeypatch):
    """7.3's source: apt-get update and download with apt's lists, cache and sources under
    work/apt/, never install and never the machine's own sources; the package unpacked into
    work/sources/7.3 and its version read from the package."""
    from conftest import made_deb
    from meminit.core import kernels

    monkeypatch.setattr(source.paths, "WORK", tmp_path / "work")
    linux = kernels.MAINLINE
    deb = made_deb(tmp_path, linux.source_package, [f"usr/src/{linux.source_package}.tar.xz"], arch="all")
    calls = tmp_path / "apt.log"
    fake_tool(tmp_path / "bin", "apt-get", f"""echo "$*" >> {calls}
case "$*" in *" download "*) cp {deb} ./{linux.source_package}_7.3.4-1~bpo13+1_all.deb ;; esac
""")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    asked: dict[str, str] = {}
    monkeypatch.setattr(deps, "ensure", asked.update)
    assert source.source_version(linux) == "1"   # made_deb's version
    # the build tools, and not the LTS's source package, which 7.3 never unpacks
    assert deps.KERNEL_BUILD.items() <= asked.items()
    assert not [p for p in asked if p.startswith("linux-source")]
    assert linux.tarball == tmp_path / "work/sources/7.3/usr/src/linux-source-7.3.tar.xz"
    assert linux.tarball.exists()
    update, download = calls.read_text().splitlines()
    for call in (update, download):
        assert f"-oDir::Etc::SourceList={tmp_path}/work/apt/trixie-backports/sources.list" in call
        assert "-oDir::Etc::SourceParts=/nonexistent" in call and "-oDir::State::status=/dev/null" in call
    assert update.endswith(" update -q") and download.endswith(" download -q linux-source-7.3")
    sources = (tmp_path / "work/apt/trixie-backports/sources.list").read_text()
    assert sources == f"deb [signed-by={deps.ARCHIVE_KEYRING}] {deps.DEBIAN_MIRROR} trixie-backports main\n"
    calls.unlink()
    assert source.source_version(linux) == "1" and not calls.exists()   # fetched once


def test_a_failed_fetch_says_which_suite(tmp_path, monkeypatch):
    from meminit.core import kernels

    monkeypatch.setattr(source.paths, "WORK", tmp_path / "work")
    fake_tool(tmp_path / "bin", "apt-get", 'echo "E: Failed to fetch trixie-backports InRelease" >&2; exit 100\n')
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(deps, "ensure", lambda packages: None)
    with pytest.raises(MeminitError, match="apt-get update of Debian's trixie-backports(.|\n)*InRelease"):
        source.source_version(kernels.MAINLINE)


def test_a_fresh_clone_hits_the_objects_another_clone_compiled(tmp_path, monkeypatch):
    """CI builds in a fresh clone: its objects compiled with debug info (-g, as the debug
    kernels are) must come from the ccache another clone filled. Without CCACHE_NOHASHDIR
    ccache hashed each clone's build directory and missed them all."""
    if not shutil.which("ccache") or not shutil.which("gcc"):
        pytest.skip("no ccache or gcc here")
    monkeypatch.setattr(paths, "CCACHE_DIR", tmp_path / "ccache")
    for clone in ("first", "second"):
        repo = tmp_path / clone
        (repo / "work" / "build").mkdir(parents=True)
        (repo / "work" / "x.c").write_text("int x(void) { return 1; }\n")
        monkeypatch.setattr(paths, "REPO", repo)
        subprocess.run(["ccache", "gcc", "-g", "-c", str(repo / "work" / "x.c"), "-o", "x.o"],
                       cwd=repo / "work" / "build", env=dict(os.environ, **build.ccache_env()), check=True)
    stats = subprocess.run(["ccache", "--print-stats"], env=dict(os.environ, CCACHE_DIR=str(tmp_path / "ccache")),
                           capture_output=True, text=True, check=True).stdout
    counts = dict(line.split("\t") for line in stats.splitlines() if "\t" in line)
    assert (int(counts["cache_miss"]), int(counts["direct_cache_hit"])) == (1, 1), stats
