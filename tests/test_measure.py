"""`meminit measure`, offline: which devices it refuses, what it puts back, and the report merge.

The /proc and /sys a device is checked against are fixture trees (devices.SystemView);
ndctl, daxctl and blkid are fake scripts on PATH; the device's bind and unbind are
commands that log a timing line the way the kernel would. test_kernel.py runs the real
command in the series guest against its emulated pmem.
"""

from __future__ import annotations

import errno
import json
import os
import re
import signal
from pathlib import Path

import pytest

from meminit import cli
from meminit.host import devices, host_measure
from meminit.kernel import memmap_log
from meminit.commands import measure, report
from meminit.core.errors import MeminitError
from test_glue_tools import fake_tool

FSDAX = {"dev": "namespace0.0", "mode": "fsdax", "map": "dev", "size": 1054867456, "blockdev": "pmem0"}
DEVDAX = {"dev": "namespace1.0", "mode": "devdax", "map": "dev", "size": 1054867456, "chardev": "dax1.0",
          "align": 2097152}


# ------------------------------------------------------------------ what a device is


def test_a_namespace_is_named_by_its_mode_and_map():
    ns = devices.namespace_device("namespace0.0", [FSDAX])
    assert (ns.scenario, ns.block, ns.iomem_names, ns.refusals) == ("fsdax-mapdev", "pmem0", ("namespace0.0",), ())
    assert ns.unbind == ("ndctl", "disable-namespace", "namespace0.0")
    dax = devices.namespace_device("namespace1.0", [DEVDAX])
    assert (dax.scenario, dax.chars, dax.iomem_names) == ("devdax-2m", ("dax1.0",), ("dax1.0", "namespace1.0"))
    # ndctl list -X: the region's dax devices, each of which must be in devdax mode
    region = {**DEVDAX, "daxregion": {"devices": [{"chardev": "dax1.0", "mode": "devdax"},
                                                  {"chardev": "dax1.1", "mode": "system-ram"}]}}
    split = devices.namespace_device("namespace1.0", [region])
    assert split.chars == ("dax1.0", "dax1.1") and "dax1.1 of namespace1.0 is onlined as system RAM" in split.refusals[0]


def test_a_namespace_listed_without_its_device_is_refused():
    # nothing to check users of: refused rather than rebound unchecked
    bare = devices.namespace_device("namespace0.0", [{k: v for k, v in FSDAX.items() if k != "blockdev"}])
    assert "no block device" in bare.refusals[0]
    bare = devices.namespace_device("namespace1.0", [{k: v for k, v in DEVDAX.items() if k != "chardev"}])
    assert "no dax device" in bare.refusals[0]


def test_namespaces_without_struct_pages_or_disabled_are_refused():
    sector = devices.namespace_device("namespace0.0", [{**FSDAX, "mode": "sector"}])
    assert "no struct pages" in sector.refusals[0]
    off = devices.namespace_device("namespace0.0", [{**FSDAX, "state": "disabled"}])
    assert "is disabled" in off.refusals[0]
    with pytest.raises(MeminitError, match="no namespace namespace9.0"):
        devices.namespace_device("namespace9.0", [FSDAX])


def test_a_dax_device_onlined_as_ram_is_refused():
    ram = devices.dax_device("dax0.0", [{"chardev": "dax0.0", "size": 1 << 30, "mode": "system-ram"}])
    assert "system RAM" in ram.refusals[0]
    dax = devices.dax_device("dax0.0", [{"chardev": "dax0.0", "size": 1 << 30, "mode": "devdax", "align": 2097152}])
    assert (dax.refusals, dax.unbind, dax.scenario) == ((), ("daxctl", "disable-device", "dax0.0"), "devdax-2m")
    off = devices.dax_device("dax0.0", [{"chardev": "dax0.0", "size": 1 << 30, "mode": "devdax",
                                         "state": "disabled"}])
    assert off.refusals == ("dax0.0 is disabled: enable it (daxctl enable-device dax0.0) and run again",)
    famfs = devices.dax_device("dax0.0", [{"chardev": "dax0.0", "size": 1 << 30, "mode": "famfs"}])
    assert famfs.refusals == ("dax0.0 is in mode 'famfs', not devdax",)


@pytest.mark.parametrize("kind,name", [("namespace", "all"), ("namespace", "namespace0.0 namespace1.0"),
                                       ("namespace", "pmem0"), ("dax", "all"), ("dax", "dax0")])
def test_only_one_device_by_its_exact_name(kind, name):
    with pytest.raises(MeminitError, match="by name"):
        devices.inspect(kind, name)


def test_test_hmm_already_loaded_is_refused(tmp_path):
    view = devices.SystemView(proc=tmp_path / "proc", sys=tmp_path / "sys", dev=tmp_path / "dev")
    assert devices.hmm_device(view).refusals == ()
    (tmp_path / "sys" / "module" / "test_hmm").mkdir(parents=True)
    assert "already loaded" in devices.hmm_device(view).refusals[0]


# ------------------------------------------------------------------ refusals


@pytest.fixture
def machine(tmp_path, monkeypatch) -> devices.SystemView:
    """pmem0 (259:0, one partition pmem0p1 259:1) and dax1.0, their nodes aliases of /dev/null,
    /dev/full and /dev/zero so a process's fd can point at them; nothing mounted, held, open; blkid finds a filesystem
    only on a path listed in tmp/fs."""
    view = devices.SystemView(proc=tmp_path / "proc", sys=tmp_path / "sys", dev=tmp_path / "dev")
    block = view.sys / "block" / "pmem0"
    (block / "holders").mkdir(parents=True)
    (block / "dev").write_text("259:0\n")
    (block / "pmem0p1" / "holders").mkdir(parents=True)
    (block / "pmem0p1" / "dev").write_text("259:1\n")
    (view.proc / "self").mkdir(parents=True)
    (view.proc / "self" / "mountinfo").write_text("22 1 0:21 / /proc rw - proc proc rw\n")
    (view.proc / "swaps").write_text("Filename Type Size Used Priority\n")
    view.dev.mkdir()
    for node, alias in (("pmem0", "null"), ("pmem0p1", "full"), ("dax1.0", "zero")):
        (view.dev / node).symlink_to(f"/dev/{alias}")
    (tmp_path / "fs").write_text("")
    fake_tool(tmp_path / "bin", "blkid", f"""grep -qxF "$4" {tmp_path}/fs || exit 2
echo DEVNAME=$4; echo TYPE=ext2
""")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    return view


def process(view: devices.SystemView, pid: int, comm: str, fd_to: str | None = None,
            maps: str | None = None) -> None:
    """A process with fd 3 open on `fd_to` and a mapping of `maps` (a /dev alias in a container)."""
    d = view.proc / str(pid)
    (d / "fd").mkdir(parents=True)
    (d / "map_files").mkdir()
    (d / "comm").write_text(comm + "\n")
    if fd_to:
        (d / "fd" / "3").symlink_to(fd_to)
    if maps:
        (d / "map_files" / "7f00-7f20").symlink_to(maps)


PMEM = devices.namespace_device("namespace0.0", [FSDAX])
DAX = devices.namespace_device("namespace1.0", [DEVDAX])


def test_an_unused_device_without_a_filesystem_may_be_rebound(machine):
    process(machine, 100, "bash", fd_to=str(machine.dev.parent / "proc" / "self" / "swaps"))
    assert devices.refusals(PMEM, [], machine) == []
    assert devices.refusals(DAX, [], machine) == []


def test_a_mounted_partition_is_refused_even_with_the_erase_flag(machine):
    (machine.proc / "self" / "mountinfo").write_text("40 1 259:1 / /srv rw - ext4 /dev/pmem0p1 rw\n")
    assert devices.refusals(PMEM, ["namespace0.0"], machine) == ["pmem0p1 is mounted on /srv"]


def test_swap_on_the_device_is_refused(machine):
    (machine.proc / "swaps").write_text("Filename Type Size Used Priority\n/dev/pmem0 partition 1 0 -2\n")
    assert devices.refusals(PMEM, [], machine) == ["pmem0 is swap"]


def test_a_device_mapper_holder_is_refused(machine):
    (machine.sys / "block" / "pmem0" / "holders" / "dm-0").mkdir()
    assert devices.refusals(PMEM, [], machine) == ["pmem0 is held by dm-0"]


def test_a_process_with_the_device_open_or_mapped_is_refused(machine):
    process(machine, 200, "sleep", fd_to=str(machine.dev / "pmem0p1"))
    process(machine, 300, "app", maps="/dev/zero")   # dax1.0, under another name
    assert devices.refusals(PMEM, [], machine) == ["pid 200 (sleep) has /dev/pmem0p1 open"]
    assert devices.refusals(DAX, [], machine) == ["pid 300 (app) maps /dev/dax1.0"]


def test_a_loop_device_or_nvme_target_backed_by_it_is_refused(machine):
    loop = machine.sys / "block" / "loop0" / "loop"
    loop.mkdir(parents=True)
    (loop / "backing_file").write_text(f"{machine.dev / 'pmem0p1'}\n")
    target = machine.sys / "kernel/config/nvmet/subsystems/nqn.x/namespaces/1"
    target.mkdir(parents=True)
    (target / "device_path").write_text(f"{machine.dev / 'pmem0'}\n")
    assert devices.refusals(PMEM, [], machine) == ["/dev/pmem0p1 backs loop0", "/dev/pmem0 backs nvmet namespace 1 of nqn.x"]


def test_a_block_device_the_kernel_holds_exclusively_is_refused(machine, monkeypatch):
    # what a mount of btrfs (0:N in mountinfo), a journal device or a bcache backing shows
    real_open = os.open

    def busy_open(path, flags, *args):
        if str(path).endswith("pmem0p1") and flags & os.O_EXCL:
            raise OSError(errno.EBUSY, "busy")
        return real_open(path, flags, *args)
    monkeypatch.setattr(os, "open", busy_open)
    (refusal,) = devices.refusals(PMEM, [], machine)
    assert refusal.startswith("pmem0p1 is claimed by the kernel")
    # a mount already says why: not said twice
    (machine.proc / "self" / "mountinfo").write_text("40 1 259:1 / /srv rw - ext4 /dev/pmem0p1 rw\n")
    assert devices.refusals(PMEM, [], machine) == ["pmem0p1 is mounted on /srv"]


def test_a_filesystem_needs_the_erase_flag_naming_exactly_this_device(machine, tmp_path):
    (tmp_path / "fs").write_text(f"{machine.dev / 'pmem0'}\n")
    (refusal,) = devices.refusals(PMEM, [], machine)
    assert "pmem0 holds ext2" in refusal and "--i-know-this-erases-namespace0.0" in refusal
    assert devices.refusals(PMEM, ["namespace0.0"], machine) == []
    assert devices.refusals(PMEM, ["namespace1.0"], machine) == [
        "--i-know-this-erases-namespace1.0 names another device than namespace0.0",
        refusal]


def test_the_erase_flag_is_taken_by_prefix_and_nothing_else_is():
    args = cli.parse(cli.make_parser(), ["measure", "--namespace", "namespace0.0",
                                         "--i-know-this-erases-namespace0.0"])
    assert measure.request_from(args).erase_named == ["namespace0.0"]
    for stray in (["--i-know-this-erases-"], ["--bogus"]):
        with pytest.raises(SystemExit):
            cli.parse(cli.make_parser(), ["measure", "--namespace", "namespace0.0", *stray])
    with pytest.raises(SystemExit):   # only measure takes it
        cli.parse(cli.make_parser(), ["report", "x", "--i-know-this-erases-namespace0.0"])


# ------------------------------------------------------------------ what it changes and puts back


def test_a_device_of_several_ranges_is_counted_so_its_hash_is_skipped():
    iomem = ("100000000-13fffffff : Persistent Memory (legacy)\n  100000000-13fffffff : namespace1.0\n"
             "    101200000-11fffffff : dax1.0\n    120000000-13fffffff : dax1.0\n")
    assert host_measure.iomem_ranges(DAX, iomem) == 2
    assert host_measure.iomem_ranges(PMEM, iomem) == 0
    assert host_measure.iomem_ranges(PMEM, iomem.replace("namespace1.0", "namespace0.0")) == 1


def test_mode_files_and_dynamic_debug_lines_are_read():
    assert host_measure.mode_of("slow [template] streaming auto\n") == (
        ["slow", "template", "streaming", "auto"], "template")
    control = ('mm/mm_init.c:2102 [mm_init]memmap_init_zone_device =p "%s initialised"\n'
               'mm/mm_init.c:1881 [mm_init]memmap_init_run =_ "%s: pfn"\n'
               'mm/page_alloc.c:10 [page_alloc]x =p "y"\n')
    assert host_measure.dynamic_debug_lines(control) == [2102]


CONTROL = {1881: "p", 2102: "_"}   # dynamic debug of mm/mm_init.c at the start: line -> flags


@pytest.fixture
def kernel_files(tmp_path, monkeypatch) -> host_measure.KernelFiles:
    """Plain files for the kernel's, and writes to them that act as the kernel's would: the
    mode file selects the mode written, the control file applies the query written."""
    d = tmp_path / "debugfs"
    (d / "dynamic_debug").mkdir(parents=True)
    files = host_measure.KernelFiles(debugfs=d, mode=d / "mode", threads=d / "threads", hash=d / "hash",
                                     dynamic_debug=d / "dynamic_debug" / "control", kmsg=tmp_path / "kmsg",
                                     lockdown=tmp_path / "no-lockdown")
    files.mode.write_text("slow [template] streaming auto\n")
    files.threads.write_text("0\n")
    control = dict(CONTROL)

    def show_control() -> None:
        files.dynamic_debug.write_text("".join(f'mm/mm_init.c:{line} [mm_init]f ={flags} "x"\n'
                                               for line, flags in control.items()))
    show_control()

    def write(path: Path, value: str) -> None:
        if path == files.mode:
            modes, _ = host_measure.mode_of(path.read_text())
            value = " ".join(f"[{m}]" if m == value else m for m in modes)
        elif path == files.dynamic_debug:
            query = re.fullmatch(r"file mm/mm_init.c(?: line (\d+))? ([+-])p", value)
            assert query, value
            for line in control:
                if query.group(1) is None or int(query.group(1)) == line:
                    control[line] = "p" if query.group(2) == "+" else "_"
            return show_control()
        path.write_text(value + "\n")
    monkeypatch.setattr(host_measure, "_write", write)
    return files


def dynamic_debug(files: host_measure.KernelFiles) -> dict[int, str]:
    return {int(m.group(1)): m.group(2) for m in re.finditer(r":(\d+) \S+ =(\S+)",
                                                                    files.dynamic_debug.read_text())}


class FakeLog:
    """The kernel log as the fake device commands below append to it."""

    def __init__(self, path: Path) -> None:
        self.path, self.done = path, 0

    def write(self, text: str) -> None:
        with self.path.open("a") as f:
            f.write(text + "\n")

    def read_new(self) -> list[str]:
        lines = self.path.read_text().splitlines() if self.path.exists() else []
        new, self.done = lines[self.done:], len(lines)
        return new

    def close(self) -> None:
        pass


def fake_device(tmp_path: Path, files: host_measure.KernelFiles, bound: bool = True,
                during_bind: str = "true") -> devices.Device:
    """Binding logs a timing line in the mode the mode file shows (after `during_bind`);
    every call is logged."""
    calls = tmp_path / "calls"
    bind = (f"echo bind >> {calls}; {during_bind}; m=$(grep -o '\\[[a-z-]*\\]' {files.mode} | tr -d '[]'); "
            f"echo \"memmap_init_zone_device initialised 256 pages in 1ms (1000000 ns, mode $m, threads 1)\" "
            f">> {files.kmsg}; echo bound >> {calls}")
    return devices.Device(kind="namespace", name="namespace0.0", scenario="fsdax-mapdev", size=1 << 30,
                          unbind=("sh", "-c", f"echo unbind >> {calls}"), bind=("sh", "-c", bind), bound=bound)


def test_rebinds_interleave_the_modes_and_everything_is_put_back(tmp_path, kernel_files):
    device = fake_device(tmp_path, kernel_files)
    req = measure.MeasureRequest(kind="namespace", name="namespace0.0", variants=["slow", "template"],
                                 rebinds=2, init_threads=1)
    kernel, seen = measure.rebind_and_restore(req, device, kernel_files, FakeLog)
    samples = memmap_log.parse_init_samples("\n".join(seen.log))
    assert [(s.variant, s.iteration, s.modes) for s in samples] == [
        ("slow", 1, ("slow",)), ("template", 1, ("template",)), ("slow", 2, ("slow",)), ("template", 2, ("template",))]
    assert (tmp_path / "calls").read_text().split() == ["unbind", "bind", "bound"] * 4
    assert kernel_files.mode.read_text().split() == ["slow", "[template]", "streaming", "auto"]
    assert kernel_files.threads.read_text().strip() == "0"
    assert dynamic_debug(kernel_files) == CONTROL
    result = measure.host_result(req, device, kernel, seen.log, seen.hashes)
    assert result["accel"] == "host" and result["kernels"] == {"series": result["host_kernel"]}
    assert [(g["variant"], len(g["steady_ms"])) for g in result["scenarios"][0]["groups"]] == [
        ("slow", 2), ("template", 2)]


def test_a_device_that_starts_unbound_gets_a_first_bind_and_ends_unbound(tmp_path, kernel_files):
    device = fake_device(tmp_path, kernel_files, bound=False)
    req = measure.MeasureRequest(kind="hmm", name="test_hmm", variants=["slow"], rebinds=1)
    _, seen = measure.rebind_and_restore(req, device, kernel_files, FakeLog)
    assert [(s.phase, s.variant) for s in memmap_log.parse_init_samples("\n".join(seen.log))] == [
        ("first", "template"), ("rebind", "slow")]
    assert (tmp_path / "calls").read_text().split() == ["bind", "bound", "unbind", "bind", "bound", "unbind"]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT])
def test_a_signal_lets_the_bind_finish_then_puts_everything_back(tmp_path, kernel_files, signum):
    # the signal arrives while the first bind runs: the bind ends ("bound"), nothing more runs
    device = fake_device(tmp_path, kernel_files, during_bind=f"kill -{signum} $PPID; sleep 0.3")
    req = measure.MeasureRequest(kind="namespace", name="namespace0.0", variants=["slow", "streaming"],
                                 rebinds=3, init_threads=2)
    before = {s: signal.getsignal(s) for s in host_measure.HELD_SIGNALS}
    with pytest.raises(KeyboardInterrupt):
        measure.rebind_and_restore(req, device, kernel_files, FakeLog)
    assert (tmp_path / "calls").read_text().split() == ["unbind", "bind", "bound"]
    assert kernel_files.mode.read_text().split() == ["slow", "[template]", "streaming", "auto"]
    assert kernel_files.threads.read_text().strip() == "0"
    assert dynamic_debug(kernel_files) == CONTROL
    # the handlers are those it found (SIG_IGN for SIGINT in a job started in the background)
    assert {s: signal.getsignal(s) for s in host_measure.HELD_SIGNALS} == before


def test_a_user_that_comes_during_the_run_stops_it(tmp_path, kernel_files):
    device = fake_device(tmp_path, kernel_files)
    req = measure.MeasureRequest(kind="namespace", name="namespace0.0", variants=["slow"], rebinds=3)
    checks = iter([[], [], ["pid 9 (md) has /dev/pmem0 open"]])
    with pytest.raises(MeminitError, match="got a user while it was measured: pid 9"):
        measure.rebind_and_restore(req, device, kernel_files, FakeLog, lambda: next(checks))
    assert (tmp_path / "calls").read_text().split() == ["unbind", "bind", "bound"] * 2
    assert dynamic_debug(kernel_files) == CONTROL


def test_a_failed_bind_is_retried_when_putting_back_and_named_if_that_fails(tmp_path, kernel_files):
    calls = tmp_path / "calls"
    device = devices.Device(kind="dax", name="dax0.0", scenario="devdax-2m", size=1 << 30,
                            unbind=("sh", "-c", f"echo unbind >> {calls}"),
                            bind=("sh", "-c", f"echo bind >> {calls}; exit 1"))
    req = measure.MeasureRequest(kind="dax", name="dax0.0", variants=["slow"], rebinds=1)
    with pytest.raises(MeminitError, match="bind >> .* failed"):
        measure.rebind_and_restore(req, device, kernel_files, FakeLog)
    assert calls.read_text().split() == ["unbind", "bind", "bind"]


def test_a_locked_down_kernel_is_refused_before_anything_changes(tmp_path, kernel_files):
    kernel_files.lockdown = tmp_path / "lockdown"
    kernel_files.lockdown.write_text("none [integrity] confidentiality\n")
    settings = host_measure.Settings()
    with pytest.raises(MeminitError, match="locked down \\(integrity"):
        host_measure.prepare_kernel(kernel_files, settings, None)
    assert settings.undo == [] and dynamic_debug(kernel_files) == CONTROL
    kernel_files.lockdown.write_text("[none] integrity confidentiality\n")
    host_measure.prepare_kernel(kernel_files, settings, None)


def test_a_kernel_without_the_switch_measures_default_only(tmp_path, kernel_files):
    kernel_files.mode.unlink()
    settings = host_measure.Settings()
    kernel = host_measure.prepare_kernel(kernel_files, settings, None)
    assert host_measure.choose_variants(["all"], kernel) == ["default"]
    with pytest.raises(MeminitError, match="measures only 'default'"):
        host_measure.choose_variants(["slow"], kernel)
    with pytest.raises(MeminitError, match="--init-threads needs"):
        host_measure.prepare_kernel(kernel_files, settings, 2)
    assert settings.restore() == []


def test_a_refused_device_changes_nothing(tmp_path, machine, kernel_files, monkeypatch):
    view = machine
    (view.sys / "module" / "test_hmm").mkdir(parents=True)
    monkeypatch.setattr(measure.deps, "ensure", lambda packages: None)

    def must_not_run(*args, **kwargs):
        raise AssertionError("a refused device was rebound")
    monkeypatch.setattr(measure, "rebind_and_restore", must_not_run)
    req = measure.MeasureRequest(kind="hmm", name="test_hmm", results_root=tmp_path / "results")
    with pytest.raises(MeminitError, match="refusing to rebind test_hmm:\n  - test_hmm is already loaded"):
        measure.measure(req, kernel_files, view)
    with pytest.raises(MeminitError, match="--rebinds must be at least 1"):
        measure.measure(measure.MeasureRequest(kind="hmm", name="test_hmm", rebinds=0), kernel_files, view)
    assert dynamic_debug(kernel_files) == CONTROL and not (tmp_path / "results").exists()


def test_a_kernel_without_what_measure_needs_is_refused_and_left_as_it_was(tmp_path, kernel_files):
    settings = host_measure.Settings()
    kernel = host_measure.prepare_kernel(kernel_files, settings, None)
    with pytest.raises(MeminitError, match="the kernel has no mode fast \\(it has slow template"):
        host_measure.choose_variants(["slow", "fast"], kernel)
    assert host_measure.choose_variants(["streaming", "slow"], kernel) == ["streaming", "slow"]
    assert settings.restore() == []
    kernel_files.threads.unlink()
    with pytest.raises(MeminitError, match="this kernel has no .*threads"):
        host_measure.prepare_kernel(kernel_files, settings, 2)
    assert settings.restore() == [] and kernel_files.mode.read_text().split()[1] == "[template]"
    assert dynamic_debug(kernel_files) == CONTROL
    kernel_files.dynamic_debug.unlink()
    with pytest.raises(MeminitError, match="needs CONFIG_DYNAMIC_DEBUG"):
        host_measure.prepare_kernel(kernel_files, settings, None)
    with pytest.raises(MeminitError, match="cannot tell the current mode"):
        host_measure.mode_of("slow template\n")


def test_what_cannot_be_put_back_is_named_and_fails_the_run(tmp_path, kernel_files):
    # the device starts unbound; the unbind that would put it back fails
    calls, unbinds = tmp_path / "calls", tmp_path / "unbinds"
    device = fake_device(tmp_path, kernel_files, bound=False)
    device = devices.Device(kind=device.kind, name=device.name, scenario=device.scenario, size=device.size,
                            bind=device.bind, bound=False,
                            unbind=("sh", "-c", f"echo unbind >> {calls}; echo x >> {unbinds}; "
                                                f"[ $(wc -l < {unbinds}) -lt 2 ]"))
    req = measure.MeasureRequest(kind="namespace", name="namespace0.0", variants=["slow"], rebinds=1)
    with pytest.raises(MeminitError, match="the machine is not as it was: namespace0.0 unbound again"):
        measure.rebind_and_restore(req, device, kernel_files, FakeLog)
    assert dynamic_debug(kernel_files) == CONTROL


def test_kernel_log_records_lost_fail_the_run(tmp_path, kernel_files):
    class LossyLog(FakeLog):
        lost = 1
    req = measure.MeasureRequest(kind="namespace", name="namespace0.0", variants=["slow"], rebinds=1)
    with pytest.raises(MeminitError, match="1 kernel log records were overwritten"):
        measure.rebind_and_restore(req, fake_device(tmp_path, kernel_files), kernel_files, LossyLog)


def test_struct_pages_that_differ_between_variants_fail_the_run():
    req = measure.MeasureRequest(kind="namespace", name="namespace0.0")
    kernel = host_measure.KernelModes(True, ["slow", "template"], "slow")
    log = [line for v in ("slow", "template") for line in (
        f"{memmap_log.MARK} rebind {v} 1",
        f"memmap_init_zone_device initialised 256 pages in 1ms (1000000 ns, mode {v}, threads 1)")]
    hashes = [f"{memmap_log.MARK}-hash slow 1 aaaa", f"{memmap_log.MARK}-hash template 1 bbbb"]
    with pytest.raises(MeminitError, match="struct pages differ between variants"):
        measure.host_result(req, PMEM, kernel, log, hashes)
    same = [h.replace("bbbb", "aaaa") for h in hashes]
    assert measure.host_result(req, PMEM, kernel, log, same)["accel"] == "host"


def test_no_timing_line_is_an_error_not_an_empty_table():
    req = measure.MeasureRequest(kind="namespace", name="namespace0.0")
    kernel = host_measure.KernelModes(True, ["slow"], "slow")
    with pytest.raises(MeminitError, match="no memmap_init_zone_device timing line"):
        measure.host_result(req, PMEM, kernel, ["meminit-mark rebind slow 1"], [])


# ------------------------------------------------------------------ report merges base and series


def host_run(tmp_path: Path, name: str, kernel: str, variants: list[str], **changes) -> Path:
    run_dir = tmp_path / name
    run_dir.mkdir()
    result = {"kind": "memmap", "host_cpu": "CPU X", "accel": "host", "host_cpus": 2, "host_kernel": "k",
              "init_threads": None,
              "device": {"kind": "namespace", "name": "namespace0.0", "size": "1G"}, "kernels": {kernel: "k"},
              "scenarios": [{"name": "fsdax-mapdev", "kind": "memmap", "groups": [
                  {"kernel": kernel, "variant": v, "pages": 256, "first_ms": None, "steady_ms": [10.0 / (i + 1)] * 2,
                   "resolution": "ns"} for i, v in enumerate(variants)]}], **changes}
    (run_dir / "result.json").write_text(json.dumps(result))
    return run_dir


def test_report_merges_a_base_and_a_series_run_into_one_table(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("meminit.core.paths.RESULTS", tmp_path / "results")
    base = host_run(tmp_path, "base", "base", ["default"])
    series = host_run(tmp_path, "series", "series", ["slow", "template"])
    assert cli.main(["report", str(base), str(series)]) == 0
    out = capsys.readouterr().out
    template = next(line for line in out.splitlines() if " template " in line)
    assert template.split()[-2:] == ["0.50", "0.50"]   # half of slow's and of base's time
    assert "accelerator host (no VM)" in out and "namespace namespace0.0 (1G)" in out
    (merged,) = (tmp_path / "results").glob("report-*/result.json")
    assert json.loads(merged.read_text())["kernels"] == {"base": "k", "series": "k"}


@pytest.mark.parametrize("change,message", [({"host_cpu": "CPU Y"}, "host_cpu 'CPU Y'"),
                                            ({"host_cpu": None}, "does not name its host CPU"),
                                            ({"device": {"name": "namespace1.0"}}, "has device"),
                                            ({"host_cpus": 16}, "has host_cpus 16"),
                                            ({"init_threads": 1}, "has init_threads 1"),
                                            ({"accel": "tcg", "guest_cpus": 2}, "has accel 'tcg'"),
                                            ({"kernels": {"base": "k"}}, "kernel base again")])
def test_report_refuses_runs_it_cannot_compare(tmp_path, change, message):
    base = host_run(tmp_path, "base", "base", ["default"])
    other = host_run(tmp_path, "other", "series", ["slow"], **change)
    if change.get("host_cpu", "") is None:
        result = json.loads((other / "result.json").read_text())
        del result["host_cpu"]
        (other / "result.json").write_text(json.dumps(result))
    with pytest.raises(MeminitError, match=message):
        report.merge([(base, json.loads((base / "result.json").read_text())),
                      (other, json.loads((other / "result.json").read_text()))])
