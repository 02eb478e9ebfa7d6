import subprocess
from pathlib import Path

import pytest

from meminit.core import units
from meminit.scenarios import thp_fault as faults
from meminit.core.errors import MeminitError

G = units.GIB

BENCH_OUTPUT = """\
info cpu=whatever
sample kind=fault strategy=thp-2M size=1073741824 threads=1 rep=0 ns=1000000000 bytes=1073741824 huge_bytes=1073741824 cpu_ns=1 prime_ns=2
sample kind=fault strategy=hugetlb-2M size=1073741824 threads=1 rep=0 ns=500000000 bytes=1073741824 huge_bytes=1073741824 cpu_ns=1 prime_ns=2
sample kind=fault strategy=thp-2M size=1073741824 threads=1 rep=1 ns=2000000000 bytes=1073741824 huge_bytes=536870912 cpu_ns=1 prime_ns=2
skip kind=fault strategy=hugetlb-1G reason=mmap(hugetlb-1G, 1073741824 bytes) failed: Cannot allocate memory
"""


def test_summarize_keeps_every_pass_the_least_huge_backing_and_skips():
    rows = {r["kind"]: r for r in faults.summarize(BENCH_OUTPUT)}
    assert [round(v, 3) for v in rows["thp-2M"]["gbps"]] == [1.074, 0.537]
    assert rows["thp-2M"]["huge_fraction"] == 0.5
    assert rows["hugetlb-2M"]["gbps"] == [pytest.approx(2.147483648)]
    assert rows["hugetlb-1G"]["skipped"].startswith("mmap(hugetlb-1G")


def test_table_compares_each_mapping_with_the_base_kernel():
    series = faults.summarize(BENCH_OUTPUT.replace("ns=500000000", "ns=250000000"))
    base = faults.summarize(BENCH_OUTPUT)
    table = faults.fault_table({"series": series, "base": base})
    hugetlb_series = next(line for line in table.splitlines() if line.startswith("hugetlb-2M  series"))
    assert hugetlb_series.split()[-1] == "2.00"
    assert "skipped: mmap(hugetlb-1G" in table


def test_guest_memory_holds_both_pools_and_the_thp_mapping():
    assert faults.guest_memory(1 * G, None) == 3 * G + faults.GUEST_OWN_MEMORY
    assert faults.guest_memory(1 * G, 8 * G) == 8 * G
    with pytest.raises(MeminitError, match="at least 5G"):
        faults.guest_memory(1 * G, 4 * G)
    with pytest.raises(MeminitError, match="multiple of 1G"):
        faults.guest_memory(512 << 20, None)


def test_one_gib_pages_are_reserved_on_the_command_line():
    assert faults.boot_parameters(2 * G) == ["hugepagesz=1G", "hugepages=2"]


def test_guest_script_reserves_the_pools_and_refuses_a_short_one(tmp_path: Path):
    bench = tmp_path / "bench"
    bench.write_text("#!/bin/sh\necho \"sample $*\"\n")
    bench.chmod(0o755)
    mm = tmp_path / "mm"
    (mm / "transparent_hugepage").mkdir(parents=True)
    for pool, free in (("hugepages-2048kB", 512), ("hugepages-1048576kB", 0)):
        (mm / "hugepages" / pool).mkdir(parents=True)
        (mm / "hugepages" / pool / "free_hugepages").write_text(f"{free}\n")
    out = tmp_path / "out.txt"
    script = tmp_path / "guest.sh"
    script.write_text(faults.guest_script(bench, 1 * G, 3, out, sysfs_mm=str(mm)))
    short = subprocess.run(["bash", str(script)], capture_output=True, text=True)
    assert short.returncode == 3, short.stderr
    assert "hugetlb pool hugepages-1048576kB has 0 free pages, need 1" in short.stderr
    assert (mm / "hugepages/hugepages-2048kB/nr_hugepages").read_text().strip() == "512"
    assert (mm / "transparent_hugepage/enabled").read_text().strip() == "madvise"
    assert not out.exists()
    (mm / "hugepages/hugepages-1048576kB/free_hugepages").write_text("1\n")
    enough = subprocess.run(["bash", str(script)], capture_output=True, text=True)
    assert enough.returncode == 0, enough.stderr
    assert out.read_text().strip() == ("sample run --fill none --clear none --fault thp-2M,hugetlb-2M,"
                                       "hugetlb-1G --fault-size 1073741824 --reps 3")
