import subprocess
from pathlib import Path

import pytest

from meminit.guest import vm
from meminit.kernel import memmap_log
from meminit.scenarios import base, memmap
from meminit.core.errors import MeminitError

DMESG = """\
[    9.000] meminit-mark first slow 0
[    9.100] memmap_init_zone_device initialised 257536 pages in 64ms (63123456 ns, mode slow)
[   10.000] meminit-mark rebind slow 1
[   10.100] memmap_init_zone_device initialised 257536 pages in 12ms (11500000 ns, mode slow)
[   11.000] meminit-mark rebind template 1
[   11.100] memmap_init_zone_device initialised 257536 pages in 8ms (7250000 ns, mode template)
[   11.200] memmap_init_zone_device initialised 1024 pages in 0ms (50000 ns, mode template)
[   12.000] meminit-mark rebind slow 2
[   12.100] memmap_init_zone_device initialised 257536 pages in 12ms (12500000 ns, mode slow)
"""


def test_samples_are_attributed_to_the_marker_before_them_and_summed_per_bind():
    samples = memmap_log.parse_init_samples(DMESG)
    by_key = {(s.phase, s.variant, s.iteration): s for s in samples}
    assert by_key[("first", "slow", 0)].ms == 63.123456
    assert by_key[("rebind", "template", 1)].pages == 257536 + 1024
    assert abs(by_key[("rebind", "template", 1)].ms - 7.3) < 1e-9
    assert all(s.resolution == "ns" for s in samples)


def test_base_kernel_lines_fall_back_to_jiffies_milliseconds():
    text = ("[1] meminit-mark rebind default 1\n"
            "[2] memmap_init_zone_device initialised 100 pages in 4ms\n")
    (sample,) = memmap_log.parse_init_samples(text)
    assert (sample.variant, sample.ms, sample.resolution) == ("default", 4.0, "jiffies")


def test_lines_before_any_marker_are_ignored():
    assert memmap_log.parse_init_samples("[1] memmap_init_zone_device initialised 1 pages in 0ms\n") == []


def test_group_samples_keeps_first_bind_apart():
    groups = memmap.group_samples("series", memmap_log.parse_init_samples(DMESG))
    slow = next(g for g in groups if g["variant"] == "slow")
    assert slow["steady_ms"] == [11.5, 12.5] and slow["first_ms"] == 63.123456
    template = next(g for g in groups if g["variant"] == "template")
    assert template["first_ms"] is None


def test_hash_mismatch_detects_a_differing_variant():
    same = memmap_log.parse_hashes("meminit-mark-hash slow 1 abc\nmeminit-mark-hash template 1 abc\n")
    assert memmap_log.hash_mismatch(same) is None
    differ = memmap_log.parse_hashes("meminit-mark-hash slow 1 abc\nmeminit-mark-hash template 1 abd\n")
    assert "template: abd" in memmap_log.hash_mismatch(differ)


def test_guest_scripts_are_valid_bash(tmp_path):
    for scenario in memmap.BY_NAME.values():
        script = tmp_path / f"{scenario.name}.sh"
        script.write_text(memmap.guest_script(scenario, ["slow", "template"], 3))
        subprocess.run(["bash", "-n", str(script)], check=True)
        assert scenario.setup in script.read_text() and scenario.bind in script.read_text()


def test_pmem_scenarios_boot_with_pmem_and_device_private_without():
    req = base.RunRequest(scenarios=[], kernels=["series", "base"], pmem_size=3 << 30)
    for name in ("fsdax-mapdev", "devdax-2m"):
        boots = memmap.BY_NAME[name].boots(req)
        assert [(b.kernel, b.parameters) for b in boots] == [("series", ("memmap=3G!4G",)),
                                                             ("base", ("memmap=3G!4G",))]
        assert memmap.BY_NAME[name].guest_memory(req) == (2 + 3 + 1) << 30  # low RAM, pmem, headroom
    private = memmap.BY_NAME["device-private"]
    assert [b.parameters for b in private.boots(req)] == [(), ()]
    assert private.guest_memory(req) == vm.DEFAULT_MEMORY


def test_threads_and_the_concrete_mode_of_auto_are_kept_per_bind():
    text = ("[1] meminit-mark rebind auto 1\n"
            "[2] memmap_init_zone_device initialised 262144 pages in 9ms (9000000 ns, mode streaming, threads 2)\n"
            "[3] memmap_init_zone_device initialised 512 pages in 0ms (40000 ns, mode template, threads 1)\n")
    (sample,) = memmap_log.parse_init_samples(text)
    assert sample.modes == ("streaming", "template")
    assert sample.threads == 2
    (group,) = memmap.group_samples("series", [sample])
    assert group["modes_used"] == ["streaming", "template"] and group["threads"] == [2]
    assert group["ran_on"] == "-"  # a kernel without the per-thread lines


def test_the_node_and_cpus_of_each_bind_come_from_the_thread_lines():
    text = ("[1] meminit-mark rebind template 1\n"
            "[2] memmap_init_run: pfn 0x140000-0x1a0000 node 1, thread 0: 4 chunks, started on CPU 1\n"
            "[2] memmap_init_run: pfn 0x140000-0x1a0000 node 1, thread 1: 3 chunks, started on CPU 0\n"
            "[3] memmap_init_zone_device initialised 262144 pages in 9ms (9000000 ns, mode template, threads 2)\n"
            "[4] meminit-mark rebind template 2\n"
            "[5] memmap_init_run: pfn 0x140000-0x1a0000 node 1, thread 0: 7 chunks, started on CPU 1, a later chunk on another\n"
            "[6] memmap_init_zone_device initialised 262144 pages in 9ms (9000000 ns, mode template, threads 1)\n")
    first, second = memmap_log.parse_init_samples(text)
    assert (first.nodes, first.cpus, first.moved) == ((1,), (0, 1), False)
    assert second.where() == "node 1, CPUs 1+"
    (group,) = memmap.group_samples("series", [first, second])
    assert group["ran_on"] == "node 1, CPUs 0,1+"


def test_guest_script_sets_the_thread_limit_only_when_asked():
    scenario = memmap.BY_NAME["fsdax-mapdev"]
    script = memmap.guest_script(scenario, ["all"], 1, threads=1)
    assert 'threads="1"' in script
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0
    assert 'threads=""' in memmap.guest_script(scenario, ["all"], 1)


def test_boot_script_fails_with_the_guest_stderr_and_where_to_look(monkeypatch, tmp_path):
    failed = vm.BootResult(console=tmp_path / "g.console.log", dmesg=tmp_path / "g.dmesg.log",
                           exit_code=3, seconds=1.0, stderr="hugetlb pool short\n")
    monkeypatch.setattr(vm, "boot", lambda spec, run_dir, accel: failed)
    spec = vm.BootSpec(image=Path("/bz"), name="thp-fault-series", script="true")
    with pytest.raises(MeminitError, match=r"thp-fault-series: guest script failed with exit 3:\n"
                                           r"hugetlb pool short\noutput: .*out.txt; console: "):
        vm.boot_script(spec, tmp_path, "tcg", output=tmp_path / "out.txt")
    monkeypatch.setattr(vm, "boot", lambda spec, run_dir, accel: vm.BootResult(
        console=failed.console, dmesg=failed.dmesg, exit_code=0, seconds=1.0))
    assert vm.boot_script(spec, tmp_path, "tcg").exit_code == 0
