import json
import subprocess
from pathlib import Path

import pytest

from meminit import scenarios
from meminit.scenarios import fault_latency as latency
from meminit.core.errors import MeminitError


def test_units_are_whole_pages_or_the_kernels_choice():
    assert latency.parse_units("default,4K,2M,32M") == ["default", "4K", "2M", "32M"]
    assert [latency.unit_pages(u) for u in ("default", "4K", "2M", "32M")] == [0, 1, 512, 8192]
    with pytest.raises(MeminitError, match="multiple of 4K"):
        latency.parse_units("6K")
    with pytest.raises(MeminitError, match="no clearing unit"):
        latency.parse_units(",")


def test_models_are_those_of_preempt_dynamic():
    assert latency.parse_models("none,full") == ["none", "full"]
    with pytest.raises(MeminitError, match="lazy"):
        latency.parse_models("lazy")


def test_cells_interleave_units_within_each_round_and_hog_setting():
    stems = [c.stem for c in latency.cells("series", "none", ["default", "2M"], ["off", "on"], 2)]
    assert stems[:4] == ["lat-series-none-r1-hogoff-default", "lat-series-none-r1-hogoff-2M",
                         "lat-series-none-r1-hogon-default", "lat-series-none-r1-hogon-2M"]
    assert len(stems) == 8 and stems[-1] == "lat-series-none-r2-hogon-2M"


def test_guest_script_is_valid_bash_and_checks_model_and_knob(tmp_path: Path):
    script = latency.guest_script("series", "voluntary", ["default", "2M"], ["on"], 1, 5, tmp_path)
    path = tmp_path / "s.sh"
    path.write_text(script)
    subprocess.run(["bash", "-n", str(path)], check=True)
    assert '"$model" != voluntary' in script
    assert "if true && [ ! -e \"$knob\" ]" in script  # a unit other than default needs the knob
    assert "cell lat-series-voluntary-r1-hogon-2M 512 on" in script
    assert "-D 5 -h 200000" in script
    base = latency.guest_script("base", "none", ["default"], ["off"], 1, 5, tmp_path)
    assert "if false && [ ! -e \"$knob\" ]" in base


def _write_cell(out: Path, cell: latency.Cell, max_us: int, clears_ns: list[int]) -> None:
    histogram = {"3": 989, "40": 10, str(max_us): 1}
    data = {"num_threads": 1, "thread": {"0": {"cycles": 1000, "min": 3, "max": max_us, "avg": 20.5, "cpu": 1,
                                               "histogram": histogram}}}
    (out / f"{cell.stem}.json").write_text(json.dumps(data))
    if clears_ns:
        (out / f"{cell.stem}.clears").write_text("".join(f"{ns}\n" for ns in clears_ns))


def test_read_cell_fails_without_cyclictest_output_or_a_finished_clear(tmp_path: Path):
    cell = latency.Cell("series", "none", 1, "off", "2M")
    with pytest.raises(MeminitError, match="no cyclictest result"):
        latency.read_cell(cell, tmp_path)
    _write_cell(tmp_path, cell, 500, [])
    with pytest.raises(MeminitError, match="no 1 GiB clear finished"):
        latency.read_cell(cell, tmp_path)
    _write_cell(tmp_path, cell, 500, [2_000_000_000])
    sample = latency.read_cell(cell, tmp_path)
    assert sample["max_us"] == 500 and sample["clear_ms"] == [2000.0]
    assert sample["p99_us"] == 40


def test_percentile_counts_cycles_beyond_the_histogram_as_the_maximum():
    assert latency.percentile_us({"10": 50, "20": 49}, 100, 900, 0.5) == 10
    assert latency.percentile_us({"10": 50, "20": 49}, 100, 900, 0.99) == 20
    assert latency.percentile_us({"10": 50, "20": 49}, 100, 900, 0.995) == 900


def test_summary_takes_the_worst_round_and_compares_it_with_base(tmp_path: Path):
    samples = []
    for kernel, unit, worst in (("base", "default", [100, 200]), ("series", "default", [900, 300]),
                                ("series", "4K", [150, 210])):
        for rnd, max_us in enumerate(worst, 1):
            cell = latency.Cell(kernel, "none", rnd, "off", unit)
            _write_cell(tmp_path, cell, max_us, [1_073_741_824])  # 1 GiB in 1.07 s: 1 GB/s
            samples.append(latency.read_cell(cell, tmp_path))
    rows = latency.summarize(samples)
    assert [(r["kernel"], r["unit"]) for r in rows] == [("base", "default"), ("series", "default"),
                                                        ("series", "4K")]
    by = {(r["kernel"], r["unit"]): r for r in rows}
    assert by[("series", "default")]["vs_base"] == pytest.approx(4.5)
    assert by[("series", "4K")]["vs_base"] == pytest.approx(1.05)
    assert by[("base", "default")]["clear_gbps"] == pytest.approx(1.0)
    table = latency.table(rows)
    assert "900/300" in table and "4.5" in table
    result = {"scenarios": [{"name": latency.SCENARIO, "kind": "latency", "rows": rows,
                             "seconds": 5, "rounds": 2}], "accel": "tcg"}
    assert "cyclictest (SCHED_FIFO, CPU 1)" in scenarios.render(result)
    pngs = scenarios.plot(result, tmp_path)
    assert pngs == [tmp_path / "latency.png"] and pngs[0].stat().st_size > 0


TRACE = """# tracer: nop
#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION
#              | |         |   |||||     |         |
       fallocate-321     [001] d.h1.   100.000100: local_timer_entry: vector=236
       fallocate-321     [001] d.h2.   100.000150: hrtimer_expire_entry: hrtimer=00000000 function=hrtimer_wakeup now=1
       fallocate-321     [001] dNh2.   100.000160: sched_wakeup: comm=cyclictest pid=300 prio=4 target_cpu=001
       fallocate-321     [001] dN.1.   100.101160: local_timer_entry: vector=236
       fallocate-321     [001] d..2.   100.101200: sched_switch: prev_comm=fallocate prev_pid=321 prev_prio=120 prev_state=R+ ==> next_comm=cyclictest next_pid=300 next_prio=4
          <idle>-0       [000] d.h2.   100.050000: local_timer_entry: vector=236
          <idle>-0       [000] d.h2.   100.060000: local_timer_entry: vector=236
      cyclictest-300     [001] .....   100.101300: tracing_mark_write: hit latency threshold (101140 > 50000)
          <idle>-0       [000] d.h2.   100.102000: local_timer_entry: vector=236
      cyclictest-300     [001] d.h1.   100.900000: local_timer_entry: vector=236
"""


def test_guest_script_traces_only_when_asked(tmp_path: Path):
    traced = latency.guest_script("series", "voluntary", ["default"], ["on"], 1, 5, tmp_path, trace_us=50000)
    path = tmp_path / "s.sh"
    path.write_text(traced)
    subprocess.run(["bash", "-n", str(path)], check=True)
    assert "trace_us=50000" in traced and "sched/sched_switch" in traced
    assert "trace_us=0" in latency.guest_script("series", "voluntary", ["default"], ["on"], 1, 5, tmp_path)


def test_longest_silence_is_found_before_the_break_mark():
    silence = latency.longest_silence(TRACE)
    assert silence is not None and abs(silence.ms - 101.0) < 1e-6
    assert "sched_wakeup: comm=cyclictest" in silence.before and "[dNh2.]" in silence.before
    assert silence.after.startswith("100.101160 fallocate-321 [dN.1.] local_timer_entry")
    assert "hit latency threshold (101140 > 50000)" in silence.break_line
    assert silence.others == 2  # CPU 0's two events inside CPU 1's silence, not the one after
    assert latency.longest_silence("# tracer: nop\n") is None


def test_trace_report_only_for_cells_that_broke(tmp_path: Path):
    cell = latency.Cell("series", "voluntary", 1, "on", "default")
    assert latency.trace_report(cell, tmp_path) == {}
    (tmp_path / f"{cell.stem}.trace").write_text(TRACE)
    report = latency.trace_report(cell, tmp_path)
    assert report["silence_ms"] == 101.0 and report["trace"] == f"{cell.stem}.trace"
