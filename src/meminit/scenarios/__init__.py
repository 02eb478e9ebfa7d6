"""The scenarios of `meminit run`, one module each, and the registry the run and report commands loop over.

A scenario (scenarios/base.py) plans its guests, writes what they run, collects and
renders its samples. result.json keeps one entry per scenario run, with the `kind`
that names the scenario class able to render it again (`meminit report`).
"""

from __future__ import annotations

from pathlib import Path

from meminit.core import results
from meminit.core.errors import MeminitError
from meminit.scenarios import fault_latency, fork, memmap, thp_fault
from meminit.scenarios.base import RunRequest, Scenario

REGISTRY: dict[str, Scenario] = {s.name: s for s in (*memmap.SCENARIOS, fork.SCENARIO,
                                                    thp_fault.SCENARIO_PLUGIN,
                                                    fault_latency.SCENARIO_PLUGIN)}
DEFAULT = "fsdax-mapdev"
# result.json entry kind -> the scenario that renders entries of that kind
_RENDERERS: dict[str, Scenario] = {}
for _scenario in REGISTRY.values():
    _RENDERERS.setdefault(_scenario.kind, _scenario)

__all__ = ["REGISTRY", "DEFAULT", "RunRequest", "Scenario", "render", "plot"]


def _by_kind(result: dict) -> dict[str, list[dict]]:
    """Entries grouped by kind, kinds in the order they first appear (memmap first: its one table)."""
    groups: dict[str, list[dict]] = {}
    entries = sorted(result["scenarios"], key=lambda e: e.get("kind", "memmap") != "memmap")
    for entry in entries:
        groups.setdefault(entry.get("kind", "memmap"), []).append(entry)
    return groups


def _renderer(kind: str) -> Scenario:
    if kind not in _RENDERERS:
        raise MeminitError(f"result.json has scenario entries of unknown kind {kind!r}")
    return _RENDERERS[kind]


def render(result: dict) -> str:
    """Every scenario of a run, each kind through its scenario, then the run's conditions."""
    blocks = [_renderer(kind).render(entries, result) for kind, entries in _by_kind(result).items()]
    lines = ["\n\n".join(blocks)] if blocks else []
    if result.get("accel") == "tcg":
        if any("replay" in entry for entry in result["scenarios"]):  # the memmap scenarios' real-CPU replay
            lines.append(f"(the guests' tables: {results.TCG_LABEL}; the replay: this host's CPU)")
        else:
            lines.append(f"({results.TCG_LABEL})")
    lines.append(conditions(result))
    return "\n".join(lines)


def conditions(result: dict) -> str:
    """Where the run ran: the host, and the guest and kernels (`run`) or the device (`measure`)."""
    host = f"host {result['host_cpu']}, " if "host_cpu" in result else ""   # runs since 2026-11-24
    if result.get("accel") == "host":
        device = result["device"]
        kernels = ", ".join(f"{k} {release}" for k, release in result["kernels"].items())
        return (f"{host}accelerator host (no VM), {result.get('host_cpus')} CPUs, {kernels}, "
                f"{device['kind']} {device['name']} ({device['size']})")
    if "tree" in result:  # run --tree: the user's own tree, two of its commits
        source = (f"tree {result['tree']} (Linux {result.get('linux')}, config of "
                  f"{result.get('config_of')}), base {result.get('base_commit', '?')[:12]}")
    else:
        source = f"{result.get('source_package')} {result.get('source_version')}"
    return (f"{host}accelerator {result.get('accel')}, guest {result.get('guest_cpus')} CPUs / "
            f"{result.get('guest_memory')}, {source}, series {result.get('series_commit', '?')[:12]}")


def plot(result: dict, run_dir: Path) -> list[Path]:
    """One figure per kind of scenario in the run, named by the scenario (plot.png for memmap)."""
    plotted = []
    for kind, entries in _by_kind(result).items():
        scenario = _renderer(kind)
        plotted.append(scenario.plot(entries, result, run_dir / scenario.plot_file))
    return plotted
