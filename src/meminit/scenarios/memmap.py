"""The memmap scenarios: a ZONE_DEVICE range re-initialised N times, memmap init timed per bind.

A scenario boots each kernel once. The guest creates the device (an emulated pmem
namespace, or test_hmm's device-private chunks; the first bind, reported apart), then
unbinds and binds it `rebinds` times per variant, the variants interleaved (default
slow template streaming default slow ...). Variants come from the series' test-only
switch when the kernel has one ("default" there is the series' own choice per range,
the others force a mode); a kernel without it (base) has one variant, "default". Before
each bind the guest writes a marker to /dev/kmsg, so every `memmap_init_zone_device
initialised ...` line of dmesg is attributed to a variant (memmap_log).
"""

from __future__ import annotations

import math
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from meminit.bench import benchbin, memmap_replay
from meminit.core import plotting, results
from meminit.guest import vm
from meminit.core.errors import MeminitError
from meminit.kernel.memmap_log import (HASH_FILE, MARK, MODE_FILE, THREADS_FILE, InitSample, hash_mismatch,
                                memmap_hash_function, parse_hashes, parse_init_samples, where_ran)
from meminit.scenarios.base import Boot, RunRequest, Scenario
from meminit.core.stats import Stats
from meminit.core.tables import render_table


@dataclass(frozen=True)
class MemmapScenario(Scenario):
    """A device whose memmap is initialised by `setup` (the first bind) and then by every `bind`."""

    name: str
    help: str
    setup: str
    unbind: str
    bind: str
    uses_pmem: bool
    # its memmap, as the real-CPU replay writes it again (memmap_replay)
    order: int = 0  # compound order of the device's pages
    altmap: bool = True  # the memmap lives in the device; else in DRAM, just allocated
    pgmap_type: str = "fsdax"  # the bench's --pgmap-type
    kind: str = "memmap"
    plot_file: str = "plot.png"

    def guest_memory(self, req: RunRequest) -> int:
        return self.guest_layout(req)[0]

    def guest_layout(self, req: RunRequest) -> tuple[int, list[str]]:
        """Guest memory and kernel parameters; refuses pmem the guest cannot address."""
        if self.uses_pmem:
            memory, memmap_param = vm.pmem_layout(req.pmem_size, req.guest.memory)
            return memory, [memmap_param]
        return req.guest.memory or vm.DEFAULT_MEMORY, []

    def boot_parameters(self, req: RunRequest) -> list[str]:
        return self.guest_layout(req)[1]

    def guest_script(self, req: RunRequest, boot: Boot, run_dir: Path) -> str:
        return guest_script(self, req.variants, req.rebinds, req.init_threads)

    def collect(self, req: RunRequest, boot: Boot, result: vm.BootResult, run_dir: Path) -> list[dict]:
        samples = parse_init_samples(result.dmesg.read_text(errors="replace"))
        if not any(s.phase == "rebind" for s in samples):
            raise MeminitError(f"{boot.name}: no memmap_init_zone_device timings in {result.dmesg}")
        hashes_file = run_dir / "hashes.txt"
        if hashes_file.exists():
            mismatch = hash_mismatch(parse_hashes(hashes_file.read_text()))
            hashes_file.rename(run_dir / f"{boot.name}.hashes.txt")
            if mismatch:
                raise MeminitError(f"{boot.name}: struct pages differ between variants ({mismatch})")
        return group_samples(boot.kernel, samples)

    def entry(self, req: RunRequest, samples: dict[Boot, list[dict]]) -> dict:
        return {"groups": [g for groups in samples.values() for g in groups]}

    def render(self, entries: list[dict], result: dict) -> str:
        text = render_table(*memmap_rows(entries))
        replays = [(e["name"], e["replay"]) for e in entries if "replay" in e]
        if replays:
            if result.get("accel") == "tcg":
                text += f"\n(the guest's table: {results.TCG_LABEL})"
            text += "\n\n" + memmap_replay.render(replays, result.get("accel"), result.get("host_cpu", "?"))
        elif result.get("replay_missing"):
            text += f"\n(no real-CPU replay: {result['replay_missing']})"
        return text

    def replay_memmap(self, entry: dict, req: RunRequest) -> memmap_replay.Memmap:
        """What one bind of this scenario initialised, from the guests' groups: pages and
        ranges as the kernel counted them, threads as the series' per-thread lines said (one
        without the threads RFC)."""
        groups = [g for g in entry["groups"] if g.get("pages")]
        if not groups:
            raise MeminitError(f"{self.name}: no bind with a page count to replay")
        ranges = groups[0].get("ranges") or 1
        pages = groups[0]["pages"] // ranges
        seen = [t for g in groups if g["kernel"] != "base" for t in g.get("threads", [])]
        if seen:
            threads, source = max(seen), "as the series guest ran"
        elif req.init_threads:
            threads, source = req.init_threads, "--init-threads"
        elif "threads" not in req.linux.rfcs and req.tree is None:
            threads, source = 1, "one thread: the series without its threads RFC"
        else:
            threads = memmap_replay.kernel_threads(pages, req.guest.cpus)
            source = f"the series' rule for {req.guest.cpus} CPUs (no series guest said)"
        # the modes the series guest ran (slow always: the speed-ups are over it); without
        # one, the series' own (auto with its RFC)
        ran = {g["variant"] for g in groups if g["kernel"] != "base"}
        modes = tuple(m for m in memmap_replay.MODES.values()
                      if (m in ran | {"slow"} if ran else m != "auto" or "auto" in req.linux.rfcs or req.tree))
        return memmap_replay.Memmap(self.name, pages=pages, ranges=ranges, order=self.order, altmap=self.altmap,
                                    pgmap_type=self.pgmap_type, threads=threads, threads_from=source,
                                    modes=modes)

    def plot(self, entries: list[dict], result: dict, out: Path) -> Path:
        return plot_memmap(entries, result, out)


def _pmem(name: str, help_text: str, mode: list[str], order: int, pgmap_type: str) -> MemmapScenario:
    create = shlex.join(["ndctl", "create-namespace", "-f", "-e", "namespace0.0", *mode])
    return MemmapScenario(name, help_text, setup=create, unbind="ndctl disable-namespace namespace0.0",
                          bind="ndctl enable-namespace namespace0.0", uses_pmem=True, order=order,
                          pgmap_type=pgmap_type)


SCENARIOS = (
    _pmem("fsdax-mapdev", "fsdax namespace, memmap in the device (altmap): rebind nd_pmem",
          ["--mode=fsdax", "--map=dev"], order=0, pgmap_type="fsdax"),
    _pmem("devdax-2m", "devdax namespace, 2 MiB compound pages: rebind dax_pmem",
          ["--mode=devdax", "--align=2M"], order=9, pgmap_type="generic"),
    # lib/test_hmm.c memremap_pages() two 256 MiB MEMORY_DEVICE_PRIVATE chunks at load
    # and unmaps them at unload: the reviewer's DRAM-backed memmap case, on any kernel.
    MemmapScenario("device-private", "DRAM-backed memmap: modprobe/rmmod test_hmm (2 x 256 MiB)",
                   setup="modprobe test_hmm", unbind="rmmod test_hmm", bind="modprobe test_hmm",
                   uses_pmem=False, altmap=False, pgmap_type="private"),
)
BY_NAME = {s.name: s for s in SCENARIOS}


def prepare_replay(req: RunRequest) -> None:
    """Build the bench before any kernel is built, so that a replay that cannot run fails
    in seconds, not after the guests."""
    if req.replay and any(name in BY_NAME for name in req.scenarios):
        try:
            benchbin.build()
        except MeminitError as exc:
            raise MeminitError(f"the real-CPU replay of the memmap needs the benchmark (bench/): {exc}\n"
                               f"{NO_REPLAY}") from exc


NO_REPLAY = ("--no-replay runs without the replay; under TCG the guest's timings are then the only ones, "
             "and they are functional, not performance figures")


def replay_run(result: dict, req: RunRequest, run_dir: Path) -> None:
    """The real-CPU replay of every memmap entry of a run (memmap_replay), kept in its entry.
    Under TCG it is the run's only performance figure, so a replay that fails fails the run;
    under KVM the guest's timings are the figures, and a failed replay is named, not fatal."""
    entries = [e for e in result["scenarios"] if e.get("kind") == "memmap"]
    if not entries:
        return
    if not req.replay:
        result["replay_missing"] = "--no-replay"
        return
    names = ", ".join(e["name"] for e in entries)
    print(f"meminit: replaying the memmap of {names} on this CPU (meminit-bench, {req.replay_reps} "
          "repetitions)", file=sys.stderr, flush=True)
    try:
        memmaps = [BY_NAME[e["name"]].replay_memmap(e, req) for e in entries]
        for entry, replay in zip(entries, memmap_replay.replay(memmaps, req.replay_reps, run_dir / "replay.txt")):
            entry["replay"] = replay
    except MeminitError as exc:
        if result.get("accel") == "tcg":
            raise MeminitError(f"the real-CPU replay failed: {exc}\nUnder TCG it is the run's only performance "
                               f"figure, so the run fails; the guests' results are in {run_dir} "
                               f"(./meminit report renders them). {NO_REPLAY}") from exc
        result["replay_missing"] = f"it failed: {exc}"
        print(f"meminit: warning: the real-CPU replay failed ({exc}); the guest's timings stand alone",
              file=sys.stderr)


def guest_script(scenario: MemmapScenario, variants: list[str], rebinds: int, threads: int | None = None) -> str:
    """Bash run in the guest; its files land in the shared run directory (the cwd)."""
    return f"""#!/bin/bash
# {scenario.name}: generated by meminit (scenarios/memmap.py)
set -eu
mountpoint -q /sys/kernel/debug || mount -t debugfs debugfs /sys/kernel/debug
echo 'file mm/mm_init.c +p' > /sys/kernel/debug/dynamic_debug/control
mark() {{ echo "{MARK} $*" > /dev/kmsg; }}
variants="{' '.join(variants)}"
if [ -e {MODE_FILE} ]; then
    tr -d '[]' < {MODE_FILE} > modes-available.txt
    [ "$variants" = all ] && variants=$(cat modes-available.txt)
    for v in $variants; do grep -qw "$v" modes-available.txt || {{ echo "kernel has no mode $v" >&2; exit 4; }}; done
else
    variants=default
fi
threads="{'' if threads is None else threads}"
if [ -n "$threads" ] && [ -e {MODE_FILE} ]; then
    [ -e {THREADS_FILE} ] || {{ echo "kernel has no {THREADS_FILE}" >&2; exit 4; }}
    echo "$threads" > {THREADS_FILE}
fi
{memmap_hash_function()}
hash_memmap() {{
    [ -e {HASH_FILE} ] && {'true' if scenario.uses_pmem else 'false'} || return 0
    local hash
    hash=$(memmap_hash_of {scenario.name}) || exit 5
    echo "{MARK}-hash $1 $2 $hash" >> hashes.txt
}}
# The first bind runs in the kernel's default mode (the bracketed one), or "default".
first=default
[ -e {MODE_FILE} ] && first=$(grep -o '\\[[a-z-]*\\]' {MODE_FILE} | tr -d '[]')
mark first "$first" 0
if ! {scenario.setup} > setup.out 2> setup.err; then
    echo "setup failed: {scenario.setup}" >&2; cat setup.err >&2; exit 3
fi
for i in $(seq 1 {rebinds}); do
    for v in $variants; do
        if [ -e {MODE_FILE} ]; then echo "$v" > {MODE_FILE}; fi
        {scenario.unbind} > /dev/null
        mark rebind "$v" "$i"
        {scenario.bind} > /dev/null
        hash_memmap "$v" "$i"
    done
done
"""


def group_samples(kernel: str, samples: list[InitSample]) -> list[dict]:
    first = next((s for s in samples if s.phase == "first"), None)
    groups = []
    for variant in dict.fromkeys(s.variant for s in samples if s.phase == "rebind"):
        steady = [s for s in samples if s.phase == "rebind" and s.variant == variant]
        steady.sort(key=lambda s: s.iteration)
        groups.append({
            "kernel": kernel, "variant": variant, "pages": steady[0].pages, "ranges": steady[0].ranges,
            "first_ms": first.ms if first and first.variant == variant else None,
            "steady_ms": [s.ms for s in steady], "resolution": steady[0].resolution,
            "modes_used": sorted({mode for s in steady for mode in s.modes}),
            "threads": sorted({s.threads for s in steady if s.threads is not None}),
            "ran_on": where_ran(steady),
        })
    return groups


def memmap_groups(scen: dict) -> list[tuple[dict, Stats, float | None, float | None]]:
    """Per group with samples: its steady-state stats and mean ratio to `slow` and to `base`."""
    groups = [g for g in scen["groups"] if g["steady_ms"]]
    means = {(g["kernel"], g["variant"]): Stats.of(g["steady_ms"]).mean for g in groups}
    base_mean = next((m for (k, _), m in means.items() if k == "base"), None)
    out = []
    for g in groups:
        st = Stats.of(g["steady_ms"])
        slow_mean = means.get((g["kernel"], "slow"))
        out.append((g, st, st.mean / slow_mean if slow_mean else None,
                    st.mean / base_mean if base_mean else None))
    return out


def variant_label(group: dict) -> str:
    """The requested variant, and the concrete modes the kernel reported when they differ.

    A fast mode that is not allowed (see docs/series.md, Gating) runs as slow, and `auto`
    without a streaming backend runs as template: the table shows both.
    """
    used = group.get("modes_used") or []
    if not used or used == [group["variant"]]:
        return group["variant"]
    return f"{group['variant']} ({'+'.join(used)})"


def memmap_rows(entries: list[dict]) -> tuple[list[str], list[list[str]]]:
    """Rows shaped like the public cover letter: first bind apart, steady state, ratios."""
    header = ["scenario", "kernel", "variant", "threads", "ran on", "pages", "first bind ms", "steady ms (mean ± sd)",
              "min", "max", "n", "vs slow", "vs base"]
    rows: list[list[str]] = []
    for scen in entries:
        for g, st, vs_slow, vs_base in memmap_groups(scen):
            first = f"{g['first_ms']:.2f}" if g.get("first_ms") is not None else "-"
            rows.append([scen["name"], g["kernel"], variant_label(g), "/".join(map(str, g.get("threads", []))) or "-",
                         g.get("ran_on", "-"), str(g.get("pages", "")), first,
                         f"{st.mean:.2f} ± {st.stdev:.2f}", f"{st.minimum:.2f}", f"{st.maximum:.2f}",
                         str(st.n),
                         f"{vs_slow:.2f}" if vs_slow is not None else "-",
                         f"{vs_base:.2f}" if vs_base is not None else "-"])
    return header, rows


def guest_source(result: dict) -> str:
    """Where a run's per-rebind timings come from, for the plot's titles."""
    accel = result.get("accel")
    if accel == "tcg":
        return "TCG guest, emulated CPU: functional timings, not performance"
    return "measured on this machine" if accel == "host" else f"{accel} guest"


def plot_memmap(scenarios: list[dict], result: dict, out: Path) -> Path:
    """Per scenario: the guest's time per rebind and its speed-ups, and beside them the
    real-CPU replay where the run has one (first under TCG, where it is the figure)."""
    plt = plotting.pyplot()
    from matplotlib.ticker import MaxNLocator  # noqa: PLC0415 - with pyplot, only when plotting

    tcg = result.get("accel") == "tcg"
    replayed = any("replay" in scen for scen in scenarios)
    cols = 3 if replayed else 2
    fig, axes = plt.subplots(len(scenarios), cols, figsize=(6 * cols, 4.5 * len(scenarios)), squeeze=False)
    source = guest_source(result)
    for row, scen in zip(axes, scenarios):
        ax_iter, ax_ratio = row[-2:] if replayed and tcg else row[:2]
        if replayed:
            ax_replay = row[0] if tcg else row[2]
            if "replay" in scen:
                memmap_replay.plot_panel(ax_replay, scen["name"], scen["replay"], result.get("host_cpu", "?"))
            else:
                ax_replay.set_axis_off()
                ax_replay.set_title(f"{scen['name']}: no real-CPU replay")
        if replayed and tcg:  # the functional panels, greyed beside the figures
            ax_iter.set_facecolor("#f0f0f0")
            ax_ratio.set_facecolor("#f0f0f0")
        for g in scen["groups"]:
            label = f"{g['kernel']}/{g['variant']}"
            ax_iter.plot(range(1, len(g["steady_ms"]) + 1), g["steady_ms"], marker="o", label=label)
        ax_iter.set_title(f"{scen['name']}: memmap init per rebind\n({source})", fontsize="medium")
        ax_iter.set_xlabel("rebind")
        ax_iter.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax_iter.set_ylabel("ms")
        ax_iter.legend(fontsize="small")
        groups = memmap_groups(scen)
        labels = [f"{g['kernel']}/{g['variant']}" for g, _, _, _ in groups]
        xs = range(len(groups))
        for offset, (what, ratios) in ((-0.2, ("slow", [g[2] for g in groups])),
                                       (0.2, ("base", [g[3] for g in groups]))):
            # no bar where there is nothing to compare with (base has no slow mode)
            speedups = [1 / ratio if ratio else math.nan for ratio in ratios]
            if not all(math.isnan(x) for x in speedups):
                ax_ratio.bar([x + offset for x in xs], speedups, 0.4, label=f"over {what}")
        ax_ratio.axhline(1.0, color="grey", linewidth=0.8)
        ax_ratio.set_xticks(list(xs), labels, rotation=30, ha="right")
        ax_ratio.set_ylabel("speed-up, steady mean (higher is better)")
        ax_ratio.set_title(f"{scen['name']}: speed-up over slow (same kernel) and over base\n({source})",
                           fontsize="medium")
        ax_ratio.legend(fontsize="small")
    if tcg:
        real = (" Real CPU: the bench's userspace replay of the same memmap (left)." if replayed else
                " No real-CPU replay in this run.")
        fig.suptitle(f"Guest panels: {results.TCG_LABEL}.{real}", color="darkred")
    return plotting.save(fig, out)
