"""The glue between the layers, offline: CLI exit codes, vm.boot against a fake vng, the
config cache, and a run -> result.json -> report round trip from a recorded guest."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from meminit import cli
from meminit.bench import forkbench, microbench
from meminit.core import deps, hostinfo, kernels, paths, results
from meminit.guest import vm
from meminit.kernel import build, kconfig, source
from meminit.commands import run as run_command
from meminit.core.errors import MeminitError
from meminit.scenarios import base, memmap

from conftest import made_deb

DATA = Path(__file__).parent / "data"

# ----------------------------------------------------------------------- CLI


def test_cli_turns_errors_into_exit_codes(monkeypatch, tmp_path, capsys):
    assert cli.main(["report", str(tmp_path / "no-such-run")]) == 1
    assert capsys.readouterr().err.startswith("meminit: error: no run directory")

    def interrupted(args):
        raise KeyboardInterrupt

    parser = cli.make_parser()
    monkeypatch.setattr(cli, "make_parser", lambda: parser)
    parser.set_defaults(func=interrupted)
    for action in parser._subparsers._group_actions[0].choices.values():
        action.set_defaults(func=interrupted)
    assert cli.main(["report", "x"]) == 130

    # SIGTERM unwinds like Ctrl-C: the command's finally blocks run
    put_back = []

    def terminated(args):
        try:
            os.kill(os.getpid(), signal.SIGTERM)
        finally:
            put_back.append(True)

    parser.set_defaults(func=terminated)
    for action in parser._subparsers._group_actions[0].choices.values():
        action.set_defaults(func=terminated)
    before = signal.getsignal(signal.SIGTERM)
    assert cli.main(["report", "x"]) == 130 and put_back == [True]
    assert signal.getsignal(signal.SIGTERM) is before


# ------------------------------------------------------------------ fake vng

FAKE_VNG = """#!{python}
# A stand-in for virtme-ng: prints a console, then runs the guest wrapper on the host with
# its reboot taken out (the real wrapper ends with sysrq 'b').
import os, subprocess, sys, time
args = sys.argv[1:]
mode = os.environ["FAKE_VNG_MODE"]
cpus = int(args[args.index("--cpus") + 1])
print("Linux version 6.12.0-fake", flush=True)
if mode == "hang":
    time.sleep(60)
brought_up = cpus - 1 if mode == "fewer-cpus" else cpus
print(f"smp: Brought up 1 node, {{brought_up}} CPUs", flush=True)
if mode == "oops":
    print("BUG: kernel NULL pointer dereference, address: 0000000000000008", flush=True)
if mode == "no-script":
    sys.exit(0)
command = args[args.index("--exec") + 1]
wrapper = open(command.split()[-1]).read()
assert wrapper.rstrip().endswith("echo b > /proc/sysrq-trigger"), wrapper
wrapper = wrapper.replace("echo b > /proc/sysrq-trigger", "true")
sys.exit(subprocess.call(["sh", "-c", wrapper]))
"""


@pytest.fixture
def fake_vng(tmp_path, monkeypatch):
    vng = tmp_path / "vng"
    vng.write_text(FAKE_VNG.format(python=sys.executable))
    vng.chmod(vng.stat().st_mode | stat.S_IEXEC)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake_dmesg = bin_dir / "dmesg"
    fake_dmesg.write_text("#!/bin/sh\necho '[    1.0] guest dmesg line'\n")
    fake_dmesg.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(vm, "_vng_path", lambda: str(vng))
    monkeypatch.setattr(vm.deps, "ensure", lambda packages: None)
    image = tmp_path / "bzImage"
    image.write_bytes(b"")

    def boot(mode: str, script: str = "echo out; echo err >&2; exit 3", timeout_s: int = 30,
             cpus: int = 2) -> vm.BootResult:
        monkeypatch.setenv("FAKE_VNG_MODE", mode)
        spec = vm.BootSpec(image=image, name="guest", script=script, kernel="series", cpus=cpus,
                           timeout_s=timeout_s)
        return vm.boot(spec, tmp_path / "run", "tcg")

    return boot


def test_boot_returns_the_scripts_exit_stderr_and_dmesg(fake_vng, tmp_path):
    result = fake_vng("ok")
    assert result.exit_code == 3
    assert result.stderr.strip() == "err"
    assert "guest dmesg line" in result.dmesg.read_text()
    assert "smp: Brought up 1 node, 2 CPUs" in result.console.read_text()


def test_boot_runs_a_script_that_ends_in_a_comment_or_a_here_doc(fake_vng):
    assert fake_vng("ok", script="echo hi >&2  # the rest of the line is a comment").stderr == "hi\n"
    assert fake_vng("ok", script="cat >&2 <<EOF\nfrom a here-doc\nEOF").stderr == "from a here-doc\n"


def test_boot_kills_a_hung_guest(fake_vng):
    with pytest.raises(MeminitError, match="hung: no exit after 2s"):
        fake_vng("hang", timeout_s=2)


def test_boot_fails_on_a_kernel_bug_even_when_the_script_passed(fake_vng):
    with pytest.raises(MeminitError, match="kernel reported a failure: BUG: kernel NULL pointer"):
        fake_vng("oops", script="true")


def test_boot_fails_when_the_guest_has_fewer_cpus_than_asked(fake_vng):
    with pytest.raises(MeminitError, match="brought up 1 of the 2 CPUs"):
        fake_vng("fewer-cpus", script="true")


def test_boot_fails_when_the_script_never_ran(fake_vng):
    with pytest.raises(MeminitError, match="ended without running the script"):
        fake_vng("no-script", script="true")


@pytest.fixture
def built_series(tmp_path, monkeypatch):
    """A series kernel whose image exists; `build.build` records what it was asked to bring up to
    date (the list it returns)."""
    kernel = build.Kernel("series", tmp_path, tmp_path / "out")
    kernel.image.parent.mkdir(parents=True)
    kernel.image.write_bytes(b"")
    monkeypatch.setattr(source, "prepare_trees", lambda *a, **k: source.Trees(series=tmp_path, base=tmp_path))
    monkeypatch.setattr(build, "kernel_for", lambda variant, trees: kernel)
    rebuilt: list[build.Kernel] = []
    monkeypatch.setattr(build, "build", lambda k, jobs=None: rebuilt.append(k) or 0.0)
    return rebuilt


def test_the_boot_command_rebuilds_a_stale_image_before_booting(built_series, fake_vng, tmp_path, monkeypatch):
    """The image exists, the tree is newer: boot must run the incremental build first (a boot
    that trusted the old image booted the kernel from before a committed change)."""
    (tmp_path / "mm.c").write_text("changed after the image was built")
    booted = []
    monkeypatch.setattr(vm, "boot", lambda spec, run_dir, accel: booted.append(list(built_series))
                        or vm.BootResult(tmp_path / "c", tmp_path / "d", exit_code=0, seconds=0.0))
    monkeypatch.setattr(results, "new_run_dir", lambda kind: tmp_path / "run")
    (tmp_path / "run").mkdir()
    assert cli.main(["boot", "series", "--accel", "tcg"]) == 0
    assert booted == [[build.Kernel("series", tmp_path, tmp_path / "out")]]


def test_the_boot_command_prints_what_the_guest_command_printed(built_series, fake_vng, tmp_path, monkeypatch,
                                                                 capsys):
    monkeypatch.setattr(results, "new_run_dir", lambda kind: tmp_path / "run")
    monkeypatch.setenv("FAKE_VNG_MODE", "ok")
    (tmp_path / "run").mkdir()
    code = cli.main(["boot", "series", "--accel", "tcg", "-c",
                     "echo MemTotal: 4 kB; echo oops >&2; exit 4  # a comment ends the command line"])
    out, err = capsys.readouterr()
    assert code == 4
    assert out.startswith("MemTotal: 4 kB\n") and "guest exit 4" in out
    assert "oops" in err and "MemTotal" not in err


def test_the_boot_command_boots_a_packaged_kernel_with_pmem(fake_vng, tmp_path, monkeypatch, capsys):
    deb = made_deb(tmp_path, "linux-image-6.12.117-x", ["boot/vmlinuz-6.12.117-x"])
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    monkeypatch.setattr(results, "new_run_dir", lambda kind: run_dir)
    monkeypatch.setattr(source, "prepare_trees", lambda *a, **k: pytest.fail("a --deb boot needs no kernel tree"))
    monkeypatch.setenv("FAKE_VNG_MODE", "ok")
    code = cli.main(["boot", "--deb", str(deb), "--pmem-size", "1G", "--accel", "tcg",
                     "-c", 'echo "$MEMINIT"; pwd; touch written-here'])
    out, _ = capsys.readouterr()
    assert code == 0, out
    assert out.splitlines()[:2] == [str(paths.REPO / "meminit"), str(run_dir)]
    assert (run_dir / "written-here").exists()
    vng = shlex.split((run_dir / "boot.cmd").read_text())
    assert vng[vng.index("--run") + 1] == str(run_dir / "image/boot/vmlinuz-6.12.117-x")
    assert "memmap=1G!4G" in vng and vng[vng.index("--memory") + 1] == "4096M"


def test_the_boot_command_boots_one_kernel(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(results, "new_run_dir", lambda kind: pytest.fail("refused after a run began"))
    assert cli.main(["boot", "debug", "--deb", str(tmp_path / "x.deb")]) == 1
    assert "boot either a built kernel (debug) or --deb, not both" in capsys.readouterr().err


# --------------------------------------------------------------- config cache


def test_configure_starts_from_tinyconfig_only_when_the_fragments_change(tmp_path, monkeypatch):
    ran: list[str] = []
    out = tmp_path / "out"
    fragment = tmp_path / "a.config"
    fragment.write_text("CONFIG_A=y\n")
    final = {"text": "CONFIG_A=y\n"}

    def fake_run(cmd, cwd=None):
        ran.append(Path(cmd[0]).name if "merge_config" in cmd[0] else cmd[-1])
        if "merge_config" in cmd[0] or cmd[-1] == "olddefconfig":
            (out / ".config").write_text(final["text"])

    monkeypatch.setattr(kconfig, "_run", fake_run)
    kconfig.configure(tmp_path / "src", out, [fragment])
    assert ran == ["tinyconfig", "merge_config.sh", "olddefconfig"]
    ran.clear()
    kconfig.configure(tmp_path / "src", out, [fragment])
    assert ran == ["olddefconfig"]
    ran.clear()
    fragment.write_text("CONFIG_A=y\nCONFIG_B=y\n")
    final["text"] = "CONFIG_A=y\nCONFIG_B=y\n"
    kconfig.configure(tmp_path / "src", out, [fragment])
    assert ran == ["tinyconfig", "merge_config.sh", "olddefconfig"]
    ran.clear()
    final["text"] = "CONFIG_A=y\n"  # the same fragments, but olddefconfig now drops B
    with pytest.raises(MeminitError, match="CONFIG_B=y"):
        kconfig.configure(tmp_path / "src", out, [fragment])
    # configured again from the fragments before it fails (tests/test_kconfig.py)
    assert ran == ["olddefconfig", "tinyconfig", "merge_config.sh", "olddefconfig"]
    ran.clear()
    final["text"] = "CONFIG_A=y\nCONFIG_B=y\n"
    kconfig.configure(tmp_path / "src", out, [fragment])  # a failed configure is not trusted again
    assert ran == ["tinyconfig", "merge_config.sh", "olddefconfig"]


# ------------------------------------------------- run -> result.json -> report


def offline_run(tmp_path: Path, monkeypatch, variants: list[str], guest) -> list[vm.BootSpec]:
    """`meminit run` with nothing built, installed or booted: built kernels stand in, each
    boot is guest(spec, run_dir, accel), and the run directory is tmp_path/run. Returns the
    boots, in order, as they happen."""
    kernels = {}
    for variant in variants:
        kernel = build.Kernel(variant, tmp_path / "src", tmp_path / "build" / variant)
        kernel.image.parent.mkdir(parents=True)
        kernel.image.write_bytes(b"")
        (kernel.out / "include/config").mkdir(parents=True)
        (kernel.out / "include/config/kernel.release").write_text(f"6.12.0-meminit-{variant}\n")
        kernels[variant] = kernel
    booted: list[vm.BootSpec] = []
    monkeypatch.setattr(deps, "ensure", lambda packages: None)
    monkeypatch.setattr(build, "build_variants", lambda names, jobs=None, linux=None: {n: kernels[n] for n in names})
    monkeypatch.setattr(vm, "boot", lambda spec, run_dir, accel: booted.append(spec) or guest(spec, run_dir, accel))
    monkeypatch.setattr(results, "new_run_dir", lambda kind: results.find_run(tmp_path) / "run")
    (tmp_path / "run").mkdir()
    monkeypatch.setattr(source, "source_version", lambda linux=None: "6.12.0-test")
    monkeypatch.setattr(source, "series_commit", lambda tree=None: "0123456789abcdef")
    return booted


def replay_fsdax(spec: vm.BootSpec, run_dir: Path, accel: str) -> vm.BootResult:
    """The recorded series guest of tests/data/run-fsdax."""
    dmesg = run_dir / f"{spec.name}.dmesg.log"
    shutil.copy(DATA / "run-fsdax" / f"{spec.name}.dmesg.log", dmesg)
    shutil.copy(DATA / "run-fsdax" / "hashes.txt", run_dir / "hashes.txt")
    return vm.BootResult(console=run_dir / "console.log", dmesg=dmesg, exit_code=0, seconds=1.0)


@pytest.fixture
def recorded_run(tmp_path, monkeypatch, capsys, fake_bench):
    """`meminit run` of fsdax-mapdev on the series kernel, its guest replayed from tests/data,
    the bench faked. (capsys first, so that the test reads what the run printed.)"""
    booted = offline_run(tmp_path, monkeypatch, ["series"], replay_fsdax)
    req = base.RunRequest(scenarios=["fsdax-mapdev"], kernels=["series"], guest=vm.GuestRequest(accel="tcg"),
                          rebinds=2)
    return run_command.run(req), booted


def test_run_writes_result_json_that_report_renders_again(recorded_run, capsys):
    run_dir, booted = recorded_run
    first = capsys.readouterr().out
    assert first.split()[:3] == ["scenario", "kernel", "variant"] and "fsdax-mapdev  series" in first
    (spec,) = booted
    assert spec.name == "fsdax-mapdev-series" and spec.kernel == "series"
    assert any(a.startswith("memmap=") for a in spec.append) and vm.SKIP_KUNIT in spec.append
    result = json.loads((run_dir / "result.json").read_text())
    (entry,) = result["scenarios"]
    assert entry["kind"] == "memmap" and entry["name"] == "fsdax-mapdev"
    variants = {g["variant"]: g for g in entry["groups"]}
    assert set(variants) == {"slow", "template", "streaming", "auto"}
    assert all(g["pages"] == 386560 and len(g["steady_ms"]) == 2 for g in variants.values())
    assert variants["slow"]["steady_ms"][0] == pytest.approx(19.66557)
    assert result["host_cpu"] == hostinfo.cpu_model() and f"host {result['host_cpu']}, accelerator tcg" in first
    assert (run_dir / "fsdax-mapdev-series.hashes.txt").exists() and (run_dir / "plot.png").exists()
    (run_dir / "plot.png").unlink()
    assert cli.main(["report", str(run_dir)]) == 0
    again = capsys.readouterr().out
    assert again.startswith(first.rstrip()) and "plot.png" in again
    assert (run_dir / "plot.png").exists()


def test_a_recorded_guest_whose_struct_pages_differ_is_refused(tmp_path):
    hashes = (DATA / "run-fsdax" / "hashes.txt").read_text().splitlines()
    hashes[1] = hashes[1][:-1] + ("0" if hashes[1][-1] != "0" else "1")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "hashes.txt").write_text("\n".join(hashes) + "\n")
    dmesg = DATA / "run-fsdax" / "fsdax-mapdev-series.dmesg.log"
    boot = base.Boot(kernel="series", name="fsdax-mapdev-series")
    result = vm.BootResult(console=dmesg, dmesg=dmesg, exit_code=0, seconds=1.0)
    with pytest.raises(MeminitError, match="struct pages differ between variants"):
        memmap.BY_NAME["fsdax-mapdev"].collect(base.RunRequest(scenarios=[]), boot, result, run_dir)


def test_microbench_measures_nothing_when_verify_fails(monkeypatch, tmp_path):
    failed = subprocess.CompletedProcess([], 1, stdout="ok fill slow\nFAIL fill template o0: record 7 differs\n",
                                         stderr="verify failed: 1 failure(s)\n")
    monkeypatch.setattr(microbench, "verify", lambda size: failed)
    monkeypatch.setattr(microbench.proc, "stream", lambda *a, **k: pytest.fail("measured after a failed verify"))
    args = cli.make_parser().parse_args(["microbench", "--quick", "--out", str(tmp_path / "out")])
    with pytest.raises(MeminitError, match="nothing measured(.|\n)*record 7 differs"):
        args.func(args)
    assert not (tmp_path / "out").exists()


# ------------------------------------- every scenario, two kernels, and old runs


def fake_guest(spec: vm.BootSpec, run_dir: Path, accel: str) -> vm.BootResult:
    """What each scenario's guest leaves in the run directory, written from its script."""
    script = Path(spec.script.split()[-1]).read_text()
    dmesg = run_dir / f"{spec.name}.dmesg.log"
    dmesg.write_text("")
    if spec.name.startswith(("fsdax-mapdev", "device-private")):
        shutil.copy(DATA / "run-fsdax" / "fsdax-mapdev-series.dmesg.log", dmesg)
        shutil.copy(DATA / "run-fsdax" / "hashes.txt", run_dir / "hashes.txt")
    elif spec.name.startswith("fork-"):
        out = Path(script.split("> ")[-1].strip().strip("'"))
        out.write_text("".join(json.dumps({"kind": "forkbench", "vmas": n, "forks": 100, "seconds": 1.0,
                                           "forks_per_sec": 100.0 + n + r}) + "\n"
                               for r in range(2) for n in (21, 221)))
    elif spec.name.startswith("thp-fault-"):
        out = Path(script.strip().split("> ")[-1].strip("'"))
        out.write_text("".join(f"sample kind=fault strategy={k} size=1073741824 bytes=1073741824 "
                               f"ns={500000000 + i} huge_bytes=1073741824\n"
                               for i in range(3) for k in ("thp-2M", "hugetlb-2M"))
                       + "skip kind=fault strategy=hugetlb-1G reason=no pool here\n")
    elif spec.name.startswith("fault-latency-"):
        for stem in re.findall(r"^cell '?(lat-\S+?)'? ", script, re.M):
            (run_dir / f"{stem}.json").write_text(json.dumps({"thread": {"0": {
                "cycles": 1000, "max": 50, "avg": 5, "histogram": {"1": 990, "40": 10}}}}))
            (run_dir / f"{stem}.clears").write_text("300000000\n310000000\n")
    return vm.BootResult(console=dmesg, dmesg=dmesg, exit_code=0, seconds=1.0)


def test_every_scenario_runs_on_two_kernels_and_report_renders_it_again(tmp_path, monkeypatch, capsys, fake_bench):
    booted = offline_run(tmp_path, monkeypatch, ["series", "base"], fake_guest)
    monkeypatch.setattr(forkbench, "build_forkbench", lambda: Path("/bin/forkbench"))
    args = cli.make_parser().parse_args([
        "run", "--scenario", "fsdax-mapdev", "--scenario", "device-private", "--scenario", "fork",
        "--scenario", "thp-fault", "--scenario", "fault-latency", "--accel", "tcg", "--fork-vmas", "21,221",
        "--latency-units", "default,2M", "--preempt", "none,full", "--latency-rounds", "1",
        "--latency-hog", "off", "--fork-reps", "2"])
    run_dir = run_command.run(run_command.request_from(args))
    printed = capsys.readouterr().out
    assert [(s.name, s.kernel, s.memory_bytes >> 30, s.cpus) for s in booted] == [
        ("fsdax-mapdev-series", "series", 5, 2), ("fsdax-mapdev-base", "base", 5, 2),
        ("device-private-series", "series", 4, 2), ("device-private-base", "base", 4, 2),
        ("fork-series", "series", 4, 2), ("fork-base", "base", 4, 2),
        ("thp-fault-series", "series", 5, 2), ("thp-fault-base", "base", 5, 2),
        ("fault-latency-series-none", "series", 4, 2), ("fault-latency-base-none", "base", 4, 2),
        ("fault-latency-series-full", "series", 4, 2), ("fault-latency-base-full", "base", 4, 2)]
    assert "preempt=full" in booted[-1].append and "hugepages=1" in booted[6].append
    result = json.loads((run_dir / "result.json").read_text())
    assert [(e["name"], e["kind"]) for e in result["scenarios"]] == [
        ("fsdax-mapdev", "memmap"), ("device-private", "memmap"), ("fork", "fork"),
        ("thp-fault", "faults"), ("fault-latency", "latency")]
    # each memmap scenario's real-CPU replay: the altmap one cold, the DRAM one just allocated
    assert [(e["replay"]["dest"], e["replay"]["memmap"]["pgmap_type"]) for e in result["scenarios"][:2]] == [
        ("cold", "fsdax"), ("warm", "private")]
    assert "replay" not in result["scenarios"][2] and printed.count("\nReal CPU (") == 1
    latency = result["scenarios"][-1]
    assert {(r["kernel"], r["model"], r["unit"]) for r in latency["rows"]} == {
        ("series", "none", "default"), ("series", "none", "2M"), ("series", "full", "default"),
        ("series", "full", "2M"), ("base", "none", "default"), ("base", "full", "default")}
    assert sorted(p.name for p in run_dir.glob("*.png")) == ["faults.png", "fork.png", "latency.png", "plot.png"]
    assert cli.main(["report", str(run_dir)]) == 0
    assert capsys.readouterr().out.startswith(printed.rstrip())


def test_report_renders_a_run_written_before_the_scenarios_were_plug_ins(tmp_path, capsys):
    """tests/data/legacy-run: result.json of every scenario kind, written by the harness at
    60aa5d2 (before issue 16), and the table its `report` printed then."""
    shutil.copy(DATA / "legacy-run" / "result.json", tmp_path / "result.json")
    assert cli.main(["report", str(tmp_path)]) == 0
    table = "\n".join(line for line in capsys.readouterr().out.splitlines() if not line.startswith("plot: "))
    assert table == (DATA / "legacy-run" / "report.txt").read_text().rstrip("\n")


def test_run_refuses_a_kernel_named_twice(monkeypatch):
    monkeypatch.setattr(deps, "ensure", lambda packages: None)
    monkeypatch.setattr(build, "build_variants", lambda names, jobs=None: pytest.fail("built kernels first"))
    with pytest.raises(MeminitError, match="names a kernel twice"):
        run_command.run(base.RunRequest(scenarios=["fork"], kernels=["series", "series"]))


def test_run_on_7_3_builds_7_3_and_refuses_6_12_only_scenarios_first(tmp_path, monkeypatch):
    built = []
    monkeypatch.setattr(deps, "ensure", lambda packages: None)
    monkeypatch.setattr(build, "build_variants",
                        lambda names, jobs=None, linux=None: built.append(linux) or pytest.fail("built"))
    for name in ("thp-fault", "fault-latency"):
        args = cli.make_parser().parse_args(["run", "--linux", "7.3", "--scenario", "fsdax-mapdev",
                                             "--scenario", name])
        with pytest.raises(MeminitError, match=f"scenario {name} runs on Linux 6.12 only: "):
            run_command.run(run_command.request_from(args))
    assert built == []
    args = cli.make_parser().parse_args(["run", "--linux", "7.3", "--scenario", "fsdax-mapdev"])
    with pytest.raises(pytest.fail.Exception):
        run_command.run(run_command.request_from(args))
    assert built == [kernels.MAINLINE]
