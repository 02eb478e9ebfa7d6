"""The real-CPU replay beside a run's guest table (issue 35, item 3), offline: the guest
replayed from tests/data/run-fsdax (test_glue.offline_run), the bench faked
(conftest.FAKE_BENCH: slow 4 GB/s, template 8, movntdq 16, auto 12; 1.5x on two threads)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path

import pytest

from meminit import cli
from meminit.bench import benchbin, memmap_replay
from meminit.core import deps, hostinfo, kernels
from meminit.guest import vm
from meminit.kernel import build
from meminit.commands import run as run_command
from meminit.core.errors import MeminitError
from meminit.scenarios import base, memmap

from test_glue import offline_run, replay_fsdax

PAGES = 386560  # the recorded namespace: one range, initialised on 2 threads
BIND_BYTES = PAGES * 64


DEVICE_PRIVATE = memmap_replay.Memmap("device-private", pages=65536, ranges=2, order=0, altmap=False,
                                      pgmap_type="private", threads=1, threads_from="as the series guest ran")


# ------------------------------------------------------------- the library


def test_the_bench_runs_once_per_distinct_memmap_after_its_verify(fake_bench, tmp_path):
    fsdax = memmap_replay.Memmap("fsdax-mapdev", pages=PAGES, ranges=1, order=0, altmap=True, pgmap_type="fsdax",
                                 threads=2, threads_from="as the series guest ran")
    figs = memmap_replay.replay([fsdax, DEVICE_PRIVATE, fsdax], reps=3, log=tmp_path / "replay.txt")
    assert [line.split()[:2] for line in fake_bench.read_text().splitlines()] == [
        ["verify", "--size"], ["run", "--sizes"], ["run", "--sizes"]]
    assert figs[0] == figs[2] and figs[0]["modes"]["template"]["ms"] == pytest.approx(BIND_BYTES / 12e9 * 1e3)
    assert figs[0]["command"][figs[0]["command"].index("--threads") + 1] == "1,2"
    assert (tmp_path / "replay.txt").read_text().count("# ") == 2


def test_a_bench_whose_verify_fails_replays_nothing(monkeypatch, fake_bench):
    failed = subprocess.CompletedProcess([], 1, stdout="ok fill slow\nFAIL fill template o0: record 7 differs\n",
                                         stderr="verify failed: 1 failure(s)\n")
    monkeypatch.setattr(benchbin, "verify", lambda size: failed)
    with pytest.raises(MeminitError, match="(?s)verify failed.*record 7 differs"):
        memmap_replay.replay([DEVICE_PRIVATE])
    assert "run " not in fake_bench.read_text()


def test_ms_per_bind_counts_every_range_of_the_bind():
    out = benchbin.parse_output("".join(
        f"sample kind=fill strategy={s} layout=o0 dest=warm size={4 << 20} threads=1 rep={r} ns={ns} "
        f"bytes={4 << 20}\n" for r in range(3) for s, ns in (("slow", 2_000_000), ("template", 1_000_000),
                                                             ("movntdq", 500_000), ("auto", 1_000_000))))
    fig = memmap_replay.figures(DEVICE_PRIVATE, ["bench"], out, 3)
    assert fig["modes"]["slow"]["ms"] == pytest.approx(4.0)  # 2 ms per 4 MiB range, two ranges per bind
    assert fig["modes"]["base"] == fig["modes"]["slow"]  # one thread: base is the slow path's samples
    text = memmap_replay.render([("device-private", fig)], "tcg", "cpu")
    assert "2 x 65536 pages, 4.0 MiB" in text and "DRAM: just allocated" in text
    assert "the replay's auto does not" in text  # test_hmm's walk hint, which the replay lacks
    assert "on CPU" not in text and "busy" not in text  # neither the samples nor the host said
    for sample in out.samples:
        sample["cpu_ns"] = sample["ns"] * 9 // 10
    disturbed = {**memmap_replay.figures(DEVICE_PRIVATE, ["b"], out, 3), "busy_before": 0.5}
    heading = memmap_replay.render([("device-private", disturbed)], "tcg", "cpu").splitlines()[0]
    assert heading.endswith("Other work kept the CPUs 50% busy in the second before it: these figures are "
                            "disturbed, the threaded ones most; run again on a quiet host. Its one-thread "
                            "samples were 90% on CPU: other load took the CPU, so these figures are disturbed.")
    del out.samples[-1]  # auto's last repetition: the medians move, nothing is missing
    memmap_replay.figures(DEVICE_PRIVATE, ["bench"], out, 3)
    out.samples[:] = [s for s in out.samples if s["strategy"] != "movntdq"]
    out.skips.append({"kind": "fill", "strategy": "movntdq", "reason": "no SSE2"})
    with pytest.raises(MeminitError, match=r"no movntdq fill on 1 thread\(s\) \(movntdq: no SSE2\)"):
        memmap_replay.figures(DEVICE_PRIVATE, ["bench"], out, 3)


def test_how_busy_the_host_was_comes_from_proc_stat():
    assert hostinfo.cpu_times("cpu  100 20 30 400 50 0 5 10 0 0\ncpu0 1 2 3 4 5 6 7 8\n") == (165, 615)
    assert hostinfo.cpu_times("") == (0, 0)
    busy = hostinfo.cpu_busy(0.05)
    assert busy is None or 0.0 <= busy <= 1.0


def test_the_series_thread_rule():
    """One thread below 16 MiB of struct pages; else CPUs, chunks (128 MiB of device memory), 16."""
    assert [memmap_replay.kernel_threads(p, 8) for p in (262143, 262144, 3 * 32768 * 4, 1 << 30)] == [1, 8, 8, 8]
    assert memmap_replay.kernel_threads(262144, 64) == 8 and memmap_replay.kernel_threads(1 << 30, 64) == 16


def test_a_memmap_that_is_not_whole_compounds_of_records_is_replayed_rounded_up():
    m = memmap_replay.Memmap("fsdax-mapdev", pages=1000, ranges=1, order=0, altmap=True, pgmap_type="fsdax",
                             threads=1, threads_from="")
    assert m.bench_size == 64 << 10  # 64000 bytes, up to whole 32 KiB
    with pytest.raises(MeminitError, match="orders 0 and 9, not 18"):
        memmap_replay.Memmap("x", 1, 1, 18, True, "fsdax", 1, "").layout


# ----------------------------------------------------- the run and its report


def recorded(tmp_path: Path, monkeypatch, accel: str = "tcg", **request) -> Path:
    """`meminit run` of fsdax-mapdev on the series kernel under `accel`; its run directory."""
    offline_run(tmp_path, monkeypatch, ["series"], replay_fsdax)
    req = base.RunRequest(scenarios=["fsdax-mapdev"], kernels=["series"], guest=vm.GuestRequest(accel=accel),
                          rebinds=2, **request)
    return run_command.run(req)


def bench_runs(log: Path) -> list[list[str]]:
    return [line.split() for line in log.read_text().splitlines() if line.startswith("run ")]


def test_a_tcg_run_prints_the_replay_beside_the_guest_table(tmp_path, monkeypatch, capsys, fake_bench):
    """The acceptance test: under TCG the run prints, after the guest's table, the bench's
    replay of the same memmap in ms per bind, keeps it in result.json, and report renders
    it again. It fails if the replay is missing under TCG."""
    run_dir = recorded(tmp_path, monkeypatch)
    printed = capsys.readouterr().out
    guest, _, rest = printed.partition("\n\nReal CPU (")
    assert guest.split()[:3] == ["scenario", "kernel", "variant"] and "fsdax-mapdev  series" in guest
    assert rest, f"no real-CPU replay under TCG:\n{printed}"
    assert "These are the performance figures: the guest's table above ran on an emulated CPU (TCG)" in rest
    assert ", family " in rest.splitlines()[0]
    assert rest.splitlines()[0].endswith("Other work kept the CPUs 2% busy in the second before it.")
    labels = ["base (per page, 1 thread)", "slow", "template", "streaming", "auto (streamed 50%)"]
    lines = [line for line in rest.splitlines() if line.startswith("fsdax-mapdev ")]
    assert len(lines) == len(labels) and all(f" {label} " in line for label, line in zip(labels, lines))
    rows = {label.split()[0]: line.split() for label, line in zip(labels, lines)}
    # ms per bind = the bind's struct-page bytes over the median rate: slow at 2 threads 6 GB/s
    assert float(rows["slow"][-5]) == pytest.approx(BIND_BYTES / 6e9 * 1e3, abs=0.01)
    assert float(rows["base"][-5]) == pytest.approx(BIND_BYTES / 4e9 * 1e3, abs=0.01)
    assert rows["template"][-2:] == ["2.00x", "3.00x"] and rows["streaming"][-2:] == ["4.00x", "6.00x"]
    # one bench run: the recorded memmap's size, order 0, cold (altmap), its 2 threads and base's 1
    (cmd,) = bench_runs(fake_bench)
    opt = {cmd[i]: cmd[i + 1] for i in range(1, len(cmd) - 1, 2)}
    assert (opt["--sizes"], opt["--layouts"], opt["--dests"], opt["--threads"], opt["--pgmap-type"]) == (
        str(BIND_BYTES), "o0", "cold", "1,2", "fsdax")
    assert (opt["--split"], opt["--chunk"], opt["--fill"]) == ("chunked", "128M", "slow,template,movntdq,auto")
    assert "verify --size 1M" in fake_bench.read_text()
    (entry,) = json.loads((run_dir / "result.json").read_text())["scenarios"]
    replay = entry["replay"]
    assert replay["memmap"] == {"scenario": "fsdax-mapdev", "pages": PAGES, "ranges": 1, "order": 0,
                                "altmap": True, "pgmap_type": "fsdax", "threads": 2,
                                "threads_from": "as the series guest ran",
                                "modes": ["slow", "template", "streaming", "auto"]}
    # the recorded guest ran the full series, auto too (before the parts)
    assert set(replay["modes"]) == {"base", "slow", "template", "streaming", "auto"}
    assert len(replay["samples"]) == 8 * 5 and (run_dir / "replay.txt").exists()
    assert cli.main(["report", str(run_dir)]) == 0
    assert capsys.readouterr().out.startswith(printed.rstrip())


def test_the_plot_says_which_panel_is_the_guest_and_which_the_real_cpu(tmp_path, monkeypatch, capsys, fake_bench,
                                                                        drawn_figures):
    recorded(tmp_path, monkeypatch)
    (fig,) = drawn_figures
    replay_ax, per_rebind, speedup = fig.axes
    assert replay_ax.get_title().startswith("fsdax-mapdev: REAL CPU, userspace replay of the same memmap")
    assert "lower is better" in replay_ax.get_ylabel()
    assert [t.get_text() for t in replay_ax.get_xticklabels()] == [
        "base (1 thread)", "slow (2 thr.)", "template (2 thr.)", "streaming (2 thr.)", "auto (2 thr.)"]
    heights = [round(b.get_height(), 2) for b in replay_ax.patches]
    assert heights == [round(BIND_BYTES / rate * 1e3, 2) for rate in (4e9, 6e9, 12e9, 24e9, 18e9)]
    for ax in (per_rebind, speedup):
        assert "TCG guest, emulated CPU: functional timings, not performance" in ax.get_title()
    assert "Real CPU: the bench's userspace replay of the same memmap (left)" in fig._suptitle.get_text()


def test_a_tcg_run_fails_loudly_when_the_replay_cannot_run(tmp_path, monkeypatch, capsys, fake_bench):
    monkeypatch.setenv("FAKE_BENCH_FAIL", "1")
    with pytest.raises(MeminitError, match="(?s)real-CPU replay failed.*cannot map the benchmark buffer"
                                           ".*run fails.*--no-replay runs without the replay"):
        recorded(tmp_path, monkeypatch)
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["scenarios"][0]["groups"] and "replay" not in result["scenarios"][0]  # the guests are kept


def test_a_bench_that_does_not_build_fails_the_run_before_any_kernel_is_built(monkeypatch):
    monkeypatch.setattr(deps, "ensure", lambda packages: None)
    monkeypatch.setattr(build, "build_variants", lambda *a, **k: pytest.fail("built kernels first"))

    def broken() -> Path:
        raise MeminitError("make -C bench failed (exit 2)")

    monkeypatch.setattr(benchbin, "build", broken)
    args = cli.make_parser().parse_args(["run", "--accel", "tcg"])
    with pytest.raises(MeminitError, match="(?s)needs the benchmark.*make -C bench failed.*--no-replay"):
        run_command.run(run_command.request_from(args))


def test_no_replay_runs_without_the_bench_and_says_so(tmp_path, monkeypatch, capsys, fake_bench):
    monkeypatch.setattr(benchbin, "build", lambda: pytest.fail("--no-replay built the bench"))
    args = cli.make_parser().parse_args(["run", "--no-replay", "--replay-reps", "3"])
    assert (run_command.request_from(args).replay, run_command.request_from(args).replay_reps) == (False, 3)
    run_dir = recorded(tmp_path, monkeypatch, replay=False)
    printed = capsys.readouterr().out
    assert "Real CPU" not in printed and "(no real-CPU replay: --no-replay)" in printed
    assert json.loads((run_dir / "result.json").read_text())["replay_missing"] == "--no-replay"


def test_under_kvm_the_replay_is_beside_the_guests_figures_and_may_fail(tmp_path, monkeypatch, capsys, fake_bench):
    recorded(tmp_path, monkeypatch, accel="kvm", replay_reps=3)
    printed = capsys.readouterr().out
    assert "Beside the guest's timings above (kvm), which are the figures, for comparison." in printed
    assert "3 interleaved repetitions" in printed and "--reps 3" in fake_bench.read_text()
    monkeypatch.setenv("FAKE_BENCH_FAIL", "1")
    run_dir = recorded(tmp_path / "again", monkeypatch, accel="kvm")
    out, err = capsys.readouterr()
    assert "warning: the real-CPU replay failed" in err and "(no real-CPU replay: it failed: " in out
    assert json.loads((run_dir / "result.json").read_text())["replay_missing"].startswith("it failed: ")


def test_a_device_private_bind_is_replayed_per_chunk_in_dram():
    """test_hmm maps two 256 MiB chunks per load: two ranges of 65536 pages, 4 MiB of
    struct pages each, in DRAM just allocated; one bind is both."""
    entry = {"name": "device-private", "groups": [
        {"kernel": "series", "variant": "slow", "pages": 131072, "ranges": 2, "threads": [1], "steady_ms": [1.0]}]}
    m = memmap.BY_NAME["device-private"].replay_memmap(entry, base.RunRequest(scenarios=[]))
    # the guest ran slow only: the replay replays that
    assert m == dataclasses.replace(DEVICE_PRIVATE, modes=("slow",)) and \
        (m.bench_size, m.layout, m.dest) == (4 << 20, "o0", "warm")


def test_the_replay_takes_its_memmap_from_the_guests_and_its_threads_as_they_ran():
    devdax = memmap.BY_NAME["devdax-2m"]
    groups = [{"kernel": "base", "variant": "default", "pages": 491520, "ranges": 1, "threads": []},
              {"kernel": "series", "variant": "slow", "pages": 491520, "ranges": 1, "threads": [1, 2]}]
    m = devdax.replay_memmap({"name": "devdax-2m", "groups": groups}, base.RunRequest(scenarios=[]))
    assert (m.layout, m.dest, m.pgmap_type, m.threads, m.threads_from) == (
        "o9", "cold", "generic", 2, "as the series guest ran")
    base_only = {"name": "devdax-2m", "groups": groups[:1]}
    assert devdax.replay_memmap(base_only, base.RunRequest(scenarios=[], init_threads=1)).threads == 1
    threaded = kernels.LTS.with_rfcs(("threads",))
    ruled = devdax.replay_memmap(base_only, base.RunRequest(scenarios=[], guest=vm.GuestRequest(cpus=4),
                                                            linux=threaded))
    assert (ruled.threads, ruled.threads_from) == (4, "the series' rule for 4 CPUs (no series guest said)")
    # without the threads RFC the kernel initialises every range on the calling thread
    alone = devdax.replay_memmap(base_only, base.RunRequest(scenarios=[], guest=vm.GuestRequest(cpus=4)))
    assert (alone.threads, alone.threads_from) == (1, "one thread: the series without its threads RFC")


def test_the_replay_replays_the_modes_the_series_kernel_has():
    """Without the rfc/auto part the series kernel has no auto: the replay leaves it out, and
    the table and plot show what is there."""
    fsdax = memmap.BY_NAME["fsdax-mapdev"]
    ran = [{"kernel": "series", "variant": v, "pages": 4096, "ranges": 1, "threads": []}
           for v in ("slow", "template", "streaming")]
    m = fsdax.replay_memmap({"name": "fsdax-mapdev", "groups": ran}, base.RunRequest(scenarios=[]))
    assert m.modes == ("slow", "template", "streaming")
    assert "auto" not in memmap_replay.command(Path("bench"), m, 5)[memmap_replay.command(Path("bench"), m, 5)
                                                                    .index("--fill") + 1]
    only_base = {"name": "fsdax-mapdev", "groups": [{**ran[0], "kernel": "base", "variant": "default"}]}
    assert "auto" not in fsdax.replay_memmap(only_base, base.RunRequest(scenarios=[])).modes
    with_auto = base.RunRequest(scenarios=[], linux=kernels.LTS.with_rfcs(("threads", "auto")))
    assert "auto" in fsdax.replay_memmap(only_base, with_auto).modes
    fig = {"ms": 1.0, "min": 0.9, "max": 1.1}
    replay = {"memmap": dataclasses.asdict(m), "modes": {k: fig for k in ("base", "slow", "template", "streaming")}}
    _, rows = memmap_replay.rows([("fsdax-mapdev", replay)])
    assert [r[5] for r in rows] == ["base (per page, 1 thread)", "slow", "template", "streaming"]
