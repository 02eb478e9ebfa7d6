"""bench/results/ summaries and the table across CPUs (issue 14)."""

import json
from pathlib import Path

import pytest

from meminit.bench import bench_results as br
from meminit.bench import bench_stats
from meminit.core.errors import MeminitError

TABLE = """\
record fill 4M layout=o0 dest=warm threads=1
strategy  min GB/s  median    max  x slow  best x  x limit  on-cpu
--------  --------  ------  -----  ------  ------  -------  ------
slow          8.00    9.00  10.00   1.00x   1.00x    0.20x    100%
template     10.12   10.30  10.61       -       -    0.20x     99%
movntdq       6.84    7.07   7.21       -       -    0.14x     99%
movnti        6.00    6.50   7.00       -       -    0.14x     99%

record fill 1G layout=o0 dest=cold threads=2 split=chunked
strategy  min GB/s  median    max  x slow  best x  x limit  on-cpu
--------  --------  ------  -----  ------  ------  -------  ------
template     16.00   16.49  17.00       -       -        -     99%
"""


def test_slug_names_the_model_and_its_numbers():
    assert br.slug("Intel(R) Xeon(R) Processor", "6", "167") == "intel-xeon-processor-f6m167"
    assert br.slug("AMD EPYC 7B13 64-Core Processor", None, None) == "amd-epyc-7b13-64-core-processor"


def test_fill_tables_of_a_table_txt_keep_the_table_strategies():
    rows = br.parse_fill_tables(TABLE)
    assert [(r["strategy"], r["size"], r["threads"], r["split"]) for r in rows] == [
        ("slow", 4 << 20, 1, "even"), ("template", 4 << 20, 1, "even"), ("movntdq", 4 << 20, 1, "even"),
        ("template", 1 << 30, 2, "chunked")]
    assert rows[1]["median"] == 10.30 and rows[1]["min"] == 10.12 and rows[1]["max"] == 10.61
    with pytest.raises(MeminitError):
        br.from_table_text("no tables here", "cpu", None, None, "2026-11-22", "x")


def _sample(strategy, ns, rep, **extra):
    return {"kind": "fill", "strategy": strategy, "layout": "o0", "dest": "cold", "size": 1 << 30,
            "threads": 1, "split": "chunked", "rep": rep, "ns": ns, "bytes": 1 << 30, **extra}


def test_learning_auto_is_judged_against_the_better_mode_of_the_same_run():
    samples = []
    for rep, jitter in enumerate((0, 1, 2)):
        samples += [_sample("template", 100_000_000 + jitter, rep), _sample("movntdq", 40_000_000 + jitter, rep),
                    _sample("auto", 41_000_000 + jitter, rep, rounds=10, stream_rounds=10,
                            streamed=990, records=1000)]
    rows = bench_stats.summarize(samples)
    auto = next(r for r in rows if r["strategy"] == "auto")
    assert auto["streamed_share"] == pytest.approx(0.99)
    a = next(a for a in bench_stats.auto_rows(rows) if a["strategy"] == "auto")
    assert a["chose"] == "S 99%" and a["best"] == "movntdq"
    assert a["ratio_best"] == pytest.approx(40 / 41, rel=1e-3) and a["passes"]
    assert a["ratio_template"] == pytest.approx(100 / 41, rel=1e-3)
    # 10 % behind the better mode, with no noise to hide in: the bar is missed
    slow_auto = [dict(s, ns=44_000_000 + s["rep"]) if s["strategy"] == "auto" else s for s in samples]
    a = next(a for a in bench_stats.auto_rows(bench_stats.summarize(slow_auto)) if a["strategy"] == "auto")
    assert not a["passes"]
    summary = {"cpu_model": "X", "family": "6", "model": "1", "date": "2026-11-24T00:00:00Z", "source": "t",
               "caches": [{"level": "3", "size": "32768K"}], "rows": br._rows(bench_stats.summarize(slow_auto))}
    assert "bar met in 0/1 configurations" in br.auto_verdict(summary)
    table = br.cpu_table([summary])
    assert "**X, family 6 model 1, L3 32768K**" in table
    assert "| o0 | cold | - / 10.7 / 26.8 / 24.4 |" in table


def test_summary_of_a_run_keeps_cpu_facts_and_fills(tmp_path: Path):
    result = {"date": "2026-11-24T00:36:38Z", "loadavg_start": "0.1", "loadavg_end": "0.9",
              "options": {"reps": 7},
              "machine": {"cpu_model": "Intel(R) Xeon(R) Processor", "cpu_family": "6", "cpu_model_number": "167",
                          "cpu_stepping": "1", "flags": ["fpu", "avx512f", "fsrm"], "caches": [], "cpus": 2,
                          "hypervisor": True, "kernel": "6.18"},
              "summary": [{"kind": "fill", "strategy": "template", "layout": "o0", "dest": "cold", "size": 4 << 20,
                           "threads": 1, "split": "chunked", "min": 1.0, "median": 2.0, "max": 3.0, "n": 7},
                          {"kind": "clear", "strategy": "stosb-4K", "size": 1 << 30, "median": 9.0}]}
    s = br.from_result(result, "results/microbench-x")
    assert s["slug"] == "intel-xeon-processor-f6m167" and s["flags"] == ["avx512f", "fsrm"]
    assert [r["strategy"] for r in s["rows"]] == ["template"]
    # a run before --auto-memo: every range learned
    assert s["auto_memo"] == 0
    assert br.from_result({**result, "options": {"reps": 7, "auto_memo": 8}}, "x")["auto_memo"] == 8
    path = br.save(s, tmp_path)
    assert br.load_all(tmp_path) == [json.loads(path.read_text())]


def test_bench_readme_table_is_in_step_with_bench_results():
    readme = br.README.read_text()
    assert br.readme_with_table(readme, br.cpu_table(br.load_all())) == readme, \
        "run ./meminit bench-results table --write"


def test_the_table_lives_on_the_results_page_not_in_the_tools_description():
    """bench/README.md describes the tool; the dated table across CPUs is bench/RESULTS.md's."""
    assert br.README == br.paths.BENCH_DIR / "RESULTS.md"
    assert br.TABLE_BEGIN not in (br.paths.BENCH_DIR / "README.md").read_text()


def test_add_refuses_a_source_that_reads_as_a_command_line(tmp_path: Path):
    """RESULTS.md shows each run's source, and tests/test_readme.py parses every `./meminit ...`
    there as a command line: a source quoting one would break the tests only after the run is
    added."""
    with pytest.raises(MeminitError, match="without './'"):
        br.add_run(tmp_path, source="./meminit microbench --auto-sweep at 56adf23")
