from pathlib import Path

import pytest

from meminit.core import units
from meminit.guest import vm
from meminit.core.errors import MeminitError

G = 1 << 30


def test_parse_and_format_size():
    assert units.parse_size("4G") == 4 * G
    assert units.parse_size("512M") == 512 << 20
    assert units.parse_size("2GiB") == 2 * G
    assert units.format_size(3 * G) == "3G"
    with pytest.raises(MeminitError):
        units.parse_size("lots")


def test_pmem_layout_sizes_guest_and_memmap_parameter():
    memory, param = vm.pmem_layout(2 * G, None)
    assert memory == 5 * G
    assert param == "memmap=2G!4G"


def test_pmem_layout_refuses_pmem_the_guest_cannot_address():
    with pytest.raises(MeminitError, match="does not fit a 4G guest.*--memory 7G"):
        vm.pmem_layout(4 * G, 4 * G)
    with pytest.raises(MeminitError, match="multiple of 128M"):
        vm.pmem_layout(100 << 20, None)


def test_kernel_failures_finds_oops_warn_panic_but_not_normal_lines():
    log = "\n".join([
        "[    1.0] Linux version 6.12.117-meminit-series",
        "[    2.0] WARNING: CPU: 0 PID: 1 at mm/mm_init.c:1000 memmap_init_zone_device+0x1/0x2",
        "[    3.0] BUG: unable to handle page fault for address: 0000",
        "[    4.0] Kernel panic - not syncing: Fatal exception",
        "[    5.0] ok 1 memmap_template_bitexact",
        "[    6.0] WARNING: possible circular locking dependency detected",
        "[    7.0] WARNING: suspicious RCU usage",
        "[    8.0] kmemleak: 2 new suspected memory leaks (see /sys/kernel/debug/kmemleak)",
        "[    9.0] Spectre V2 : WARNING: Unprivileged eBPF is enabled with eIBRS on, data leaks possible",
        "[   10.0] UBSAN: shift-out-of-bounds in mm/memory.c:6900:3",
    ])
    found = vm.kernel_failures(log)
    assert len(found) == 7 and found[0].startswith("[    2.0] WARNING")
    assert not [line for line in found if "Spectre" in line]


def test_vng_command_selects_accelerator_and_passes_parameters(tmp_path):
    spec = vm.BootSpec(image=tmp_path / "bzImage", name="t", script="true", memory_bytes=5 * G,
                       cpus=2, append=["memmap=2G!4G"])
    tcg = vm.vng_command(spec, "tcg", tmp_path)
    assert "--disable-kvm" in tcg and "5120M" in tcg and "memmap=2G!4G" in tcg and "tsc=reliable" in tcg
    kvm = vm.vng_command(spec, "kvm", tmp_path)
    assert "--disable-kvm" not in kvm and "--qemu-opts=-machine q35" in kvm


def test_guest_wrapper_records_exit_and_dmesg_then_reboots(tmp_path):
    spec = vm.BootSpec(image=tmp_path / "bzImage", name="t", script="false")
    wrapped = vm.guest_wrapper(spec, tmp_path)
    assert f"dmesg > {tmp_path}/t.dmesg.log" in wrapped and f"echo $rc > {tmp_path}/t.exit" in wrapped
    assert f"2> {tmp_path}/t.stderr" in wrapped
    assert wrapped.endswith("echo b > /proc/sysrq-trigger")


def test_host_tsc_rate_comes_from_cpuinfo_only_for_a_constant_tsc():
    cpuinfo = "processor\t: 0\ncpu MHz\t\t: 2596.138\nflags\t\t: fpu tsc constant_tsc nonstop_tsc\n"
    assert vm.host_tsc_khz(cpuinfo) == 2596138
    assert vm.host_tsc_khz(cpuinfo.replace(" constant_tsc", "")) is None


def test_guest_cpus_reads_what_the_kernel_brought_up():
    assert vm.guest_cpus("[    0.3] smp: Brought up 1 node, 2 CPUs\n") == 2
    assert vm.guest_cpus("[    0.3] smp: Brought up 1 node, 1 CPU\n") == 1
    assert vm.guest_cpus("no smp line\n") is None


class _Stop(Exception):
    pass


def test_boot_runs_the_script_from_a_file_not_the_kernel_command_line(tmp_path, monkeypatch):
    image = tmp_path / "bzImage"
    image.write_bytes(b"")
    seen: dict[str, list[str]] = {}

    def fake_popen(cmd, **kwargs):
        seen["cmd"] = cmd
        raise _Stop

    monkeypatch.setattr(vm.deps, "ensure", lambda packages: None)
    monkeypatch.setattr(vm.subprocess, "Popen", fake_popen)
    script = "echo " + "x" * 3000  # far more than a kernel command line holds
    spec = vm.BootSpec(image=image, name="long", script=script, append=["kunit.enable=0"])
    with pytest.raises(_Stop):
        vm.boot(spec, tmp_path / "run", "tcg")
    cmd = seen["cmd"]
    exec_arg = cmd[cmd.index("--exec") + 1]
    assert len(exec_arg) < 200 and "long.guest.sh" in exec_arg
    assert script in (tmp_path / "run" / "long.guest.sh").read_text()
    assert "kunit.enable=0" in cmd


def test_boot_refuses_kernel_parameters_that_would_not_fit():
    with pytest.raises(MeminitError, match="exceed"):
        vm.check_append(["x" * 600, "y" * 600])
    vm.check_append(["memmap=2G!4G", "kunit.enable=0"])


def test_kvm_trial_installs_qemu_before_asking_its_version(tmp_path, monkeypatch):
    order: list[str] = []

    def ensure(packages):
        order.append("ensure")
        raise MeminitError("stop after ensure")

    monkeypatch.setattr(vm.os, "access", lambda path, mode: True)
    monkeypatch.setattr(vm.deps, "ensure", ensure)
    monkeypatch.setattr(vm, "_host_key", lambda: order.append("host_key") or "key")
    with pytest.raises(MeminitError, match="stop after ensure"):
        vm.detect_accel(tmp_path / "bzImage", tmp_path)
    assert order == ["ensure"]


def test_numa_pmem_layout_puts_the_cpus_below_4g_and_the_pmem_node_above():
    assert vm.numa_pmem_layout(5 * G, 2) == ["2048M,cpus=0-1", "3072M"]
    spec = vm.BootSpec(image=Path("bzImage"), name="t", script="true", memory_bytes=5 * G,
                       numa=vm.numa_pmem_layout(5 * G, 2))
    cmd = vm.vng_command(spec, "tcg", Path("/tmp"))
    assert cmd[cmd.index("--numa") + 1] == "2048M,cpus=0-1" and cmd.count("--numa") == 2
    with pytest.raises(MeminitError, match="too small"):
        vm.numa_pmem_layout(2 * G, 2)


def test_the_tcg_only_qemu_drops_kvm_and_hvf_and_keeps_everything_else(tmp_path, monkeypatch):
    """kunit.py of 7.x asks for KVM first; where /dev/kvm opens but guests hang, its
    guests must still run, under TCG."""
    import os
    import subprocess

    real = tmp_path / "bin" / "qemu-system-x86_64"
    real.parent.mkdir()
    real.write_text('#!/bin/sh\nfor a do printf "%s|" "$a"; done\n')
    real.chmod(0o755)
    monkeypatch.setenv("PATH", f"{real.parent}{os.pathsep}{os.environ['PATH']}")
    wrappers = vm.tcg_only_qemu(tmp_path / "wrap", ["x86_64"])
    out = subprocess.run([str(wrappers / "qemu-system-x86_64"), "-nodefaults", "-accel", "kvm",
                          "-accel", "hvf", "-accel", "tcg", "-append", "a b", "-m", "1024"],
                         capture_output=True, text=True, check=True).stdout
    assert out == "-nodefaults|-accel|tcg|-append|a b|-m|1024|"
    with pytest.raises(MeminitError, match="qemu-system-nosuch is not installed"):
        vm.tcg_only_qemu(tmp_path / "wrap", ["nosuch"])
