"""Fork with many VMAs (issue 8): parsing, tables, and forkbench for real on the host."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import time
from pathlib import Path

import pytest

from meminit import cli
from meminit.bench import forkbench, maple_harness
from meminit.core.errors import MeminitError


def _fb(rep, n, fps, forks=100, before=24, call=50.0):
    return json.dumps({
        "kind": "forkbench", "rep": rep, "vmas": n, "maps_before": before,
        "maps_during": before + n, "maps_after": before, "touched": False, "forks": forks,
        "seconds": forks / fps, "forks_per_sec": fps, "fork_call_us": call,
    })


def _mc(rep, n, method, us, **extra):
    row = {"kind": "maple_copy", "rep": rep, "n": n, "method": method, "copies": 10,
           "seconds": us * 10e-6, "us_per_copy": us, "ns_per_entry": us * 1e3 / n,
           "nodes": 3, "verified": True, **extra}
    return json.dumps(row)


# ---------------------------------------------------------------- forkbench parsing

def test_parse_forkbench_skips_console_noise():
    output = "\n".join([
        "[    3.141] random kernel message",
        _fb(0, 21, 1000.0),
        "guest$ " + _fb(0, 221, 800.0),   # prompt glued in front
        "",
        "{not json of ours}",
    ])
    rows = forkbench.parse_forkbench(output)
    assert [r["vmas"] for r in rows] == [21, 221]
    assert rows[1]["forks_per_sec"] == 800.0


def test_parse_forkbench_error_row_fails():
    bad = '{"kind": "forkbench", "vmas": 70000, "error": "N exceeds vm.max_map_count: x"}'
    with pytest.raises(MeminitError, match="max_map_count"):
        forkbench.parse_forkbench(_fb(0, 21, 1000.0) + "\n" + bad)


def test_parse_forkbench_needs_rows_and_checks_vma_count():
    with pytest.raises(MeminitError, match="no result line"):
        forkbench.parse_forkbench("nothing here\n")
    row = json.loads(_fb(0, 221, 500.0))
    row["maps_during"] = row["maps_before"] + 220      # merged with a neighbour
    with pytest.raises(MeminitError, match="rose by 220"):
        forkbench.parse_forkbench(json.dumps(row))
    row = json.loads(_fb(0, 221, 500.0))
    row["forks"] = 0
    with pytest.raises(MeminitError, match="no fork"):
        forkbench.parse_forkbench(json.dumps(row))


def test_fork_table_medians_spread_and_ratios():
    rows = forkbench.parse_forkbench("\n".join([
        _fb(0, 21, 1000.0), _fb(0, 221, 500.0), _fb(0, 51221, 10.0),
        _fb(1, 51221, 12.0), _fb(1, 221, 550.0), _fb(1, 21, 1100.0),
        _fb(2, 21, 900.0), _fb(2, 221, 450.0), _fb(2, 51221, 8.0),
    ]))
    summary = forkbench.summarize_forks(rows)
    assert [s["vmas"] for s in summary] == [21, 221, 51221]
    assert summary[0]["forks_per_sec_median"] == 1000.0
    assert summary[0]["reps"] == 3
    assert summary[0]["spread_pct"] == pytest.approx(20.0)
    assert summary[1]["rel_to_first"] == pytest.approx(0.5)
    assert summary[2]["rel_to_first"] == pytest.approx(0.01)

    table = forkbench.fork_table(rows)
    lines = table.splitlines()
    assert "vs N=21" in lines[0]
    row221 = next(line for line in lines if line.split("|")[1].strip() == "221")
    assert "0.500×" in row221           # vs N=21 and vs previous N
    assert "450–550" in row221
    row51221 = next(line for line in lines if line.split("|")[1].strip() == "51221")
    assert "0.010×" in row51221 and "0.020×" in row51221


def test_plot_forks_draws_the_median_rate_and_the_cost_of_vmas(tmp_path, drawn_figures):
    rows = forkbench.parse_forkbench("\n".join([_fb(0, 21, 1000.0), _fb(0, 221, 600.0),
                                           _fb(1, 21, 900.0), _fb(1, 221, 500.0)]))
    out = tmp_path / "fork.png"
    forkbench.plot_forks({"base": rows, "series": rows[:2]}, out, title="test")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (fig,) = drawn_figures
    rate, cost = fig.axes[:2]
    assert [c.lines[0].get_ydata().tolist() for c in rate.containers] == [[950.0, 550.0], [1000.0, 600.0]]
    assert [line.get_ydata().tolist() for line in cost.get_lines()] == [[1.0, 550 / 950], [1.0, 0.6]]


def test_forkbench_command_quotes_and_validates(tmp_path):
    binary = tmp_path / "dir with space" / "forkbench"
    cmd = forkbench.forkbench_command(binary, [21, 221], 1.5, reps=3)
    assert shlex.split(cmd) == [str(binary), "-n", "21,221", "-t", "1.5", "-r", "3"]
    with pytest.raises(MeminitError):
        forkbench.forkbench_command(binary, [21, 0], 1.0)
    with pytest.raises(MeminitError):
        forkbench.forkbench_command(binary, [21], 0)
    with pytest.raises(MeminitError):
        forkbench.forkbench_command(binary, [], 1.0)


# ---------------------------------------------------------------- maple comparison

def test_maple_summary_ratios_are_per_repetition():
    out = "\n".join([
        _mc(0, 21, "mt_dup", 2.0, us_mt_dup_only=1.0), _mc(0, 21, "bulk_insert", 4.0),
        _mc(0, 21, "store_each", 8.0),
        _mc(1, 21, "mt_dup", 4.0, us_mt_dup_only=2.0), _mc(1, 21, "bulk_insert", 6.0),
        _mc(1, 21, "store_each", 12.0),
        _mc(2, 21, "mt_dup", 3.0, us_mt_dup_only=1.5), _mc(2, 21, "bulk_insert", 9.0),
        _mc(2, 21, "store_each", 9.0),
    ])
    rows = maple_harness.parse_maple_dup(out)
    (s,) = maple_harness.summarize_maple(rows)
    assert s["mt_dup"]["us_median"] == 3.0
    assert s["mt_dup"]["us_mt_dup_only_median"] == 1.5
    # per-rep ratios 2.0, 1.5, 3.0 -> median 2.0 (the ratio of medians would be 2.0 too,
    # but min/max must come from single repetitions)
    assert s["ratio_bulk_insert"] == {"median": 2.0, "min": 1.5, "max": 3.0, "reps": 3}
    assert s["ratio_store_each"]["median"] == 3.0
    table = maple_harness.maple_table(rows)
    assert "2.00× (1.50–3.00)" in table
    assert "3.00× (3.00–4.00)" in table


def test_parse_maple_dup_fails_on_error_or_unverified():
    err = '{"error": "copy has a different range", "n": 221, "method": "mt_dup"}'
    with pytest.raises(MeminitError, match="different range"):
        maple_harness.parse_maple_dup(_mc(0, 21, "mt_dup", 1.0) + "\n" + err)
    row = json.loads(_mc(0, 21, "mt_dup", 1.0))
    row["verified"] = False
    with pytest.raises(MeminitError):
        maple_harness.parse_maple_dup(json.dumps(row))
    with pytest.raises(MeminitError, match="no result line"):
        maple_harness.parse_maple_dup("maple_tree: 1 of 1 tests passed\n")


def test_harness_bench_params_reads_the_source(tmp_path):
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "test_maple_tree.c").write_text(
        "static int nr_entries = 7;\n"
        "static noinline void __init bench_forking(void)\n{\n"
        "\tint i, nr_entries = 134, nr_fork = 80000, ret;\n}\n")
    assert maple_harness.harness_bench_params(tmp_path) == {"entries": 135, "dups": 80000}


# ---------------------------------------------------------------- forkbench for real

def _count_maps(pid: int) -> int:
    return len(Path(f"/proc/{pid}/maps").read_text().splitlines())


def test_forkbench_real_run_on_host():
    binary = forkbench.build_forkbench()
    cmd = forkbench.forkbench_command(binary, [5, 300], 0.25, reps=1)
    proc = subprocess.run(shlex.split(cmd), capture_output=True, text=True, timeout=20)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = forkbench.parse_forkbench(proc.stdout)
    assert [r["vmas"] for r in rows] == [5, 300]
    for r in rows:
        assert r["maps_during"] - r["maps_before"] == r["vmas"]
        assert r["maps_after"] == r["maps_before"]
        assert r["forks"] >= 3 and r["forks_per_sec"] > 0
        assert r["seconds"] >= 0.25
    first_cells = [line.split("|")[1].strip() for line in forkbench.fork_table(rows).splitlines()]
    assert first_cells[2:] == ["5", "300"]


def test_forkbench_vmas_seen_from_outside():
    """While it forks, /proc/PID/maps of forkbench really holds N more VMAs."""
    binary = forkbench.build_forkbench()
    n = 2000
    child = subprocess.Popen([str(binary), "-n", str(n), "-t", "1.5"],
                             stdout=subprocess.PIPE, text=True)
    try:
        baseline = _count_maps(child.pid)
        peak = baseline
        deadline = time.monotonic() + 1.2
        while time.monotonic() < deadline and child.poll() is None:
            try:
                peak = max(peak, _count_maps(child.pid))
            except (FileNotFoundError, ProcessLookupError):
                break
            # no early end at baseline + n: read before the child's own start-up maps,
            # the baseline can be short of the maps_before it reports
            time.sleep(0.05)
        out, _ = child.communicate(timeout=15)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    (row,) = forkbench.parse_forkbench(out)
    assert peak >= row["maps_before"] + n
    assert row["forks"] > 0


def test_forkbench_fails_loudly_past_max_map_count():
    binary = forkbench.build_forkbench()
    limit = int(Path("/proc/sys/vm/max_map_count").read_text())
    proc = subprocess.run([str(binary), "-n", str(limit + 1), "-t", "0.1"],
                          capture_output=True, text=True, timeout=20)
    assert proc.returncode != 0
    with pytest.raises(MeminitError, match="max_map_count"):
        forkbench.parse_forkbench(proc.stdout)


def test_maple_bench_command_runs_both_benchmarks_and_writes_its_results(tmp_path, monkeypatch, capsys):
    """The command's glue, with stand-ins for the two built programs."""
    src = tmp_path / "maple-src"
    (src / "lib").mkdir(parents=True)
    (src / "lib" / "test_maple_tree.c").write_text(
        "static noinline void __init bench_forking(void)\n{\n\tint i, nr_entries = 134, nr_fork = 80000;\n}\n")
    (src / maple_harness.EXPORT_STAMP).write_text("git:0123abc\npaths\n")
    harness = tmp_path / "maple"
    harness.write_text("#!/bin/sh\necho 'maple_tree: 5 of 5 tests passed'\n")
    ours = tmp_path / "maple_dup_vs_insert"
    rows = [_mc(rep, n, m, us) for rep in range(2) for n in (21, 221)
            for m, us in (("mt_dup", 1.0), ("bulk_insert", 3.0), ("store_each", 4.0))]
    ours.write_text("#!/bin/sh\ncat <<'END'\n" + "\n".join(rows) + "\nEND\n")
    for binary in (harness, ours):
        binary.chmod(0o755)
    monkeypatch.setattr(maple_harness, "MAPLE_SRC", src)
    monkeypatch.setattr(maple_harness, "build_maple", lambda: (harness, ours))
    out = tmp_path / "out"
    args = cli.make_parser().parse_args(["maple-bench", "--counts", "21,221", "--reps", "2",
                                         "--fork-seconds", "0", "--out", str(out)])
    assert args.func(args) == 0
    result = json.loads((out / "result.json").read_text())
    assert result["source"] == "git:0123abc" and result["harness_bench_fork"]["dups"] == 80000
    assert [(s["n"], s["ratio_bulk_insert"]["median"]) for s in result["maple_copy"]["summary"]] == [(21, 3.0), (221, 3.0)]
    assert re.fullmatch(r"\d{8}T\d{6}Z", result["timestamp"]) and (out / "maple.png").exists()
    assert "3.00× (3.00–3.00)" in capsys.readouterr().out
