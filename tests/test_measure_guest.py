"""`meminit measure` for real: the checkout's own command, run inside the debug series guest
against its emulated pmem, as a user runs it on a machine with pmem.

The guest sees the checkout read-only and writes into the run directory. It runs the
command against every case it must refuse (a name that is not one device, consent naming
another device, a filesystem without consent, a mounted namespace, a namespace a process
holds open), then measures a namespace that holds a file (with consent) and checks the
file is intact after, and interrupts a measurement with SIGINT in the middle of its
rebinds. The series' mode, thread count and dynamic debug state are recorded before and
after each, so anything not put back shows.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path

import matplotlib
import pytest

from conftest import long_guest_trees
from meminit import scenarios
from meminit.core import paths, results
from meminit.guest import vm
from meminit.kernel import build, memmap_log
from meminit.scenarios import memmap

pytestmark = pytest.mark.kernel

PMEM = 1 << 30
REBINDS = 2
REFUSED = {   # step -> what its error must say
    "not-one-device": "takes one namespace by name",
    "consent-for-another": "--i-know-this-erases-namespace1.0 names another device",
    "filesystem": "pmem0 holds ext2",
    "mounted": "pmem0 is mounted on /tmp/fs",
    "busy": "(sleep) has /dev/pmem0 open",
    "dax-busy": "(sleep) has /dev/dax0.0 open",
}
# step -> the table row it measures (each rebinds once per mode)
MEASURED = {"devdax": "devdax-2m", "dax": "devdax-2m", "hmm": "device-private"}


def guest_script() -> str:
    # the host's font cache: under TCG, matplotlib builds its own for minutes
    fonts = shlex.quote(matplotlib.get_cachedir())
    measure = f"env MPLCONFIGDIR=/tmp/mpl {shlex.quote(str(paths.REPO / 'meminit'))} measure --results measure"
    return f"""#!/bin/bash
set -u
mkdir -p /tmp/mpl && cp {fonts}/fontlist-*.json /tmp/mpl/ 2>/dev/null
# debugfs stays unmounted but while state() reads it, so measure mounts it and must unmount it
mountpoint -q /sys/kernel/debug && umount /sys/kernel/debug
state() {{ mountpoint /sys/kernel/debug; mount -t debugfs debugfs /sys/kernel/debug
          cat {memmap_log.MODE_FILE} {memmap_log.THREADS_FILE}
          grep -F mm/mm_init.c /sys/kernel/debug/dynamic_debug/control | grep -c ' =p ' || true
          umount /sys/kernel/debug
          ndctl list -N -n namespace0.0 | tr -d ' \\n'; echo; }}
step() {{ local name=$1; shift; state > $name.before; "$@" > $name.out 2> $name.err; echo $? > $name.rc
         state > $name.after; }}
ndctl create-namespace -f -e namespace0.0 --mode=fsdax --map=dev > create.json || exit 3
step not-one-device {measure} --namespace all --rebinds 1
step consent-for-another {measure} --namespace namespace0.0 --rebinds 1 --i-know-this-erases-namespace1.0
/sbin/mkfs.ext2 -q -F /dev/pmem0 || exit 3
mkdir -p /tmp/fs && mount /dev/pmem0 /tmp/fs || exit 3
head -c 1M /dev/urandom > /tmp/fs/data && sha256sum < /tmp/fs/data > data.sha256
step mounted {measure} --namespace namespace0.0 --rebinds 1 --i-know-this-erases-namespace0.0
umount /tmp/fs
step filesystem {measure} --namespace namespace0.0 --rebinds 1
sleep 600 < /dev/pmem0 & holder=$!
step busy {measure} --namespace namespace0.0 --rebinds 1 --i-know-this-erases-namespace0.0
kill $holder; wait $holder
step measured {measure} --namespace namespace0.0 --rebinds {REBINDS} --init-threads 1 \\
    --i-know-this-erases-namespace0.0
mount -o ro /dev/pmem0 /tmp/fs && sha256sum < /tmp/fs/data > data-after.sha256; umount /tmp/fs
# SIGINT, as Ctrl-C sends it, to the whole process group once the first rebind is done:
# the rebind in progress ends (ndctl, in its own session, does not get it), then
# everything is put back
state > interrupted.before
setsid {measure} --namespace namespace0.0 --rebinds 50 --i-know-this-erases-namespace0.0 \\
    > interrupted.out 2> interrupted.err & pid=$!
for i in $(seq 1200); do grep -q '^meminit: rebind ' interrupted.err && break; sleep 0.5; done
kill -INT -- -$pid; wait $pid; echo $? > interrupted.rc
state > interrupted.after
# the same namespace as devdax, then its dax device by name (busy, then free), then test_hmm
ndctl create-namespace -f -e namespace0.0 --mode=devdax --align=2M > devdax.json || exit 3
step devdax {measure} --namespace namespace0.0 --rebinds 1 --no-plot
sleep 600 < /dev/dax0.0 & holder=$!
step dax-busy {measure} --dax dax0.0 --rebinds 1
kill $holder; wait $holder
step dax {measure} --dax dax0.0 --rebinds 1 --no-plot
step hmm {measure} --hmm --rebinds 1 --no-plot
grep -c '^test_hmm ' /proc/modules > hmm-loaded-after.txt || true
"""


@dataclass
class GuestMeasure:
    run_dir: Path
    result: vm.BootResult

    def step(self, name: str) -> tuple[int, str, str]:
        rc, out, err = ((self.run_dir / f"{name}.{ext}").read_text() for ext in ("rc", "out", "err"))
        return int(rc), out, err


@pytest.fixture(scope="module")
def guest_measure(kernel_trees) -> GuestMeasure:
    kernel = build.kernel_for("debug", long_guest_trees(kernel_trees, "measure"))
    build.build(kernel)
    run_dir = results.new_run_dir("test-measure")
    memory, memmap_param = vm.pmem_layout(PMEM, None)
    script = run_dir / "guest.sh"
    script.write_text(guest_script())
    accel = vm.resolve_accel("auto", kernel.image, run_dir, kernel.variant)
    spec = vm.BootSpec(image=kernel.image, kernel=kernel.variant, name="measure",
                       script=f"bash {shlex.quote(str(script))}", memory_bytes=memory, cpus=2,
                       append=[memmap_param, vm.SKIP_KUNIT], timeout_s=1800)
    result = vm.boot(spec, run_dir, accel)
    assert result.exit_code == 0, f"guest exit {result.exit_code}: {result.stderr_tail()}; see {run_dir}"
    return GuestMeasure(run_dir, result)


def result_of(run: Path, scenario: str, kind: str) -> Path:
    """The result.json of the one measurement of `scenario` on a device of `kind`."""
    (found,) = [f for f in (run / "measure").glob("measure-*/result.json")
                if (r := json.loads(f.read_text()))["scenarios"][0]["name"] == scenario
                and r["device"]["kind"] == kind]
    return found


@pytest.mark.parametrize("step", list(REFUSED))
def test_measure_refuses_and_changes_nothing(guest_measure, step):
    rc, out, err = guest_measure.step(step)
    assert rc == 1 and REFUSED[step] in err, err
    assert "meminit: rebind" not in err   # refused before any rebind
    run = guest_measure.run_dir
    assert (run / f"{step}.before").read_text() == (run / f"{step}.after").read_text()


def test_measure_gives_run_s_table_and_puts_everything_back(guest_measure):
    rc, out, err = guest_measure.step("measured")
    assert rc == 0, err
    run = guest_measure.run_dir
    assert (run / "measured.before").read_text() == (run / "measured.after").read_text()
    result_file = result_of(run, "fsdax-mapdev", "namespace")
    result = json.loads(result_file.read_text())
    modes = (run / "measured.before").read_text().split("\n")[1].replace("[", "").replace("]", "").split()
    (entry,) = result["scenarios"]
    assert entry["name"] == "fsdax-mapdev" and result["accel"] == "host"
    assert [g["variant"] for g in entry["groups"]] == modes
    assert all(len(g["steady_ms"]) == REBINDS and g["threads"] == [1] for g in entry["groups"])
    hashes = memmap_log.parse_hashes((result_file.parent / "hashes.txt").read_text())
    assert set(hashes) == set(modes) and memmap_log.hash_mismatch(hashes) is None
    header, rows = memmap.memmap_rows(result["scenarios"])
    assert out == scenarios.render(result) + "\n" and len(rows) == len(modes)
    assert (result_file.parent / "plot.png").exists()


@pytest.mark.parametrize("step", list(MEASURED))
def test_measure_rebinds_dax_and_device_private_memory(guest_measure, step):
    rc, out, err = guest_measure.step(step)
    assert rc == 0, err
    run = guest_measure.run_dir
    assert (run / f"{step}.before").read_text() == (run / f"{step}.after").read_text()
    result_file = result_of(run, MEASURED[step], "namespace" if step == "devdax" else step)
    groups = json.loads(result_file.read_text())["scenarios"][0]["groups"]
    assert groups and all(len(g["steady_ms"]) == 1 and g["pages"] > 0 for g in groups)
    if step == "hmm":   # loaded for the first bind, unloaded again at the end
        assert (run / "hmm-loaded-after.txt").read_text().strip() == "0"
        assert any(g["first_ms"] is not None for g in groups)


def test_measure_keeps_the_data_of_a_namespace_it_was_allowed_to_rebind(guest_measure):
    run = guest_measure.run_dir
    assert (run / "data-after.sha256").read_text() == (run / "data.sha256").read_text()


def test_measure_interrupted_puts_everything_back(guest_measure):
    run = guest_measure.run_dir
    rc = int((run / "interrupted.rc").read_text())
    err = (run / "interrupted.err").read_text()
    assert rc == 130 and "meminit: interrupted" in err, err
    assert (run / "interrupted.before").read_text() == (run / "interrupted.after").read_text()
