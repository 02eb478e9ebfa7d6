"""Shared fixtures: the kernel tree and the once-per-session series kernel boot."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from meminit.core import kernels
from meminit.kernel import source


# The guests beyond the test kernel's first boot, 3-15 minutes each under TCG: the boot
# under the kernel's other preemption model, the soak, the mm selftests, measure's and
# package's guests. `meminit test --long` runs them (before a submission); CI and the
# plain test command skip them, saying so, to keep a cold CI of both kernels, with their
# KUnit targets, within its budget.
LONG_FIXTURES = frozenset({"preempt_other_boot", "short_soak", "fast_selftests", "guest_measure", "packaged"})
LONG_OPTION = "--long"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(LONG_OPTION, action="store_true",
                     help="also run the long guest tests (the other preemption model, soak, selftests, "
                          "measure, package)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test that needs the kernel tree is a kernel test: unpacking and patching the 6.12
    source takes minutes on a fresh clone, and `meminit test --quick` must not do it.
    A test that needs a LONG_FIXTURES guest is long, and skips without --long."""
    run_long = config.getoption(LONG_OPTION)
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if "kernel_trees" in fixtures:
            item.add_marker(pytest.mark.kernel)
        if fixtures & LONG_FIXTURES:
            item.add_marker(pytest.mark.long)
            if not run_long:
                item.add_marker(pytest.mark.skip(
                    reason="a long guest test: `meminit test --long` runs it, before a submission"))


@pytest.fixture(scope="session")
def kernel_trees() -> source.Trees:
    """The unpacked source of the kernel under test ($MEMINIT_LINUX, `meminit test --linux`;
    6.12 by default) with its series applied (unpacked on first use)."""
    return source.prepare_trees(kernels.from_env())


def git_repo(path: Path) -> Path:
    """A tiny git repository with one commit tagged `base`, for source.py tests."""
    path.mkdir(parents=True, exist_ok=True)
    ident = ["-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "-C", str(path), "init", "-q", "-b", "series"], check=True)
    (path / "file.c").write_text("".join(f"line {i}\n" for i in range(1, 21)))
    subprocess.run(["git", "-C", str(path), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(path), *ident, "commit", "-q", "-m", "base"], check=True)
    subprocess.run(["git", "-C", str(path), "tag", "base"], check=True)
    return path


def made_deb(directory: Path, package_name: str, files: list[str], arch: str = "amd64") -> Path:
    """A package named `package_name` with `files` (empty) in it, made by dpkg-deb."""
    root = directory / f"{package_name}-root"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN" / "control").write_text(
        f"Package: {package_name}\nVersion: 1\nArchitecture: {arch}\nMaintainer: m <m@localhost>\n"
        "Description: d\n")
    for name in files:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(b"")
    deb = directory / f"{package_name}_1_amd64.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "-b", str(root), str(deb)], check=True,
                   capture_output=True)
    return deb


@pytest.fixture
def drawn_figures(monkeypatch) -> list:
    """Every matplotlib figure plotting.save() writes during the test, still readable."""
    from meminit.core import plotting

    figures: list = []
    real_save = plotting.save
    monkeypatch.setattr(plotting, "save", lambda fig, out, **kw: figures.append(fig) or real_save(fig, out, **kw))
    return figures


@pytest.fixture(scope="session")
def lts_kernel_trees(kernel_trees) -> source.Trees:
    """kernel_trees, for the tests of what serves 6.12 only (`package`): on another kernel
    they skip, saying so."""
    if kernel_trees.linux != kernels.LTS:
        pytest.skip(f"serves Linux {kernels.LTS.version} only so far (issue 34)")
    if kernel_trees.linux.rfcs:
        # package builds the default stack, what users run: it would re-apply the tree under
        # the session's kernel tests
        pytest.skip("package builds the default stack: run it without --rfc")
    return kernel_trees


def long_guest_trees(trees: source.Trees, guest: str) -> source.Trees:
    """trees, for one of the long guests (kernels.LONG_GUESTS): on a kernel it has not been
    ported to (Linux.long_guests) the test skips, saying so."""
    assert guest in kernels.LONG_GUESTS, guest
    if guest not in trees.linux.long_guests:
        pytest.skip(f"the {guest} guest is not ported to Linux {trees.linux.version} yet (issue 34)")
    return trees


# A stand-in for meminit-bench (bench/): `verify` passes, `run` prints one fill sample per
# case and repetition, interleaved as the real one does, at made-up rates: GB/s by strategy,
# 1.5x on more than one thread. Each command line goes to $FAKE_BENCH_LOG; FAKE_BENCH_FAIL
# makes `run` fail.
FAKE_BENCH = """#!{python}
import os, sys
args = sys.argv[1:]
with open(os.environ["FAKE_BENCH_LOG"], "a") as log:
    log.write(" ".join(args) + "\\n")
if args[0] == "verify":
    print("ok fill slow layout=o0 pgmap=fsdax threads=1")
    print("verify passed: 0 failure(s)")
    sys.exit(0)
if os.environ.get("FAKE_BENCH_FAIL"):
    print("meminit-bench: cannot map the benchmark buffer", file=sys.stderr)
    sys.exit(1)
opt = lambda name: args[args.index(name) + 1].split(",")
rates = {{"slow": 4.0, "template": 8.0, "movntdq": 16.0, "auto": 12.0}}
print("info llc_bytes=33554432")
for rep in range(int(opt("--reps")[0])):
    for size in map(int, opt("--sizes")):
        for layout in opt("--layouts"):
            for dest in opt("--dests"):
                for threads in map(int, opt("--threads")):
                    for fill in opt("--fill"):
                        rate = rates[fill] * (1.5 if threads > 1 else 1.0) * (1 + (rep % 3 - 1) / 10)
                        ns = round(size / rate)
                        auto = (" rounds=2 stream_rounds=1 streamed=%d records=%d probe_tmpl_ns=10 probe_stream_ns=9"
                                " probe_records=512" % (size // 128, size // 64)) if fill == "auto" else ""
                        print(f"sample kind=fill strategy={{fill}} layout={{layout}} dest={{dest}} size={{size}} "
                              f"threads={{threads}} split=chunked rep={{rep}} ns={{ns}} bytes={{size}} cpu_ns={{ns}}{{auto}}")
"""


@pytest.fixture
def fake_bench(tmp_path, monkeypatch) -> Path:
    """benchbin.build() gives FAKE_BENCH, the host is quiet; returns the file its command lines go to."""
    import sys

    from meminit.bench import benchbin
    from meminit.core import hostinfo

    binary = tmp_path / "fake-meminit-bench"
    binary.write_text(FAKE_BENCH.format(python=sys.executable))
    binary.chmod(0o755)
    log = tmp_path / "fake-bench.log"
    log.write_text("")
    monkeypatch.setenv("FAKE_BENCH_LOG", str(log))
    monkeypatch.delenv("FAKE_BENCH_FAIL", raising=False)
    monkeypatch.setattr(benchbin, "build", lambda: binary)
    monkeypatch.setattr(hostinfo, "cpu_busy", lambda seconds=1.0: 0.02)  # a quiet host, at once
    return log
