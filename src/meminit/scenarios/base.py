"""What a scenario is: the guests it boots, what it runs there, and how it shows the results.

A scenario plans its boots (one per kernel, or more), writes the bash each guest runs,
collects samples from the files the guest wrote into the shared run directory, folds
them into its entry of result.json, and renders and plots that entry. The run command
loops over the registry (meminit.scenarios); nothing outside a scenario's module knows
what its samples look like.
"""

from __future__ import annotations

import shlex
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path

from meminit.bench import forkbench, memmap_replay
from meminit.guest import vm
from meminit.kernel import build, own_tree
from meminit.core.kernels import KERNELS, LTS, Linux
from meminit.core.units import GIB

TIMEOUT_S = 1200  # a guest's timeout in a run, unless --timeout


@dataclass(frozen=True)
class RunRequest:
    """Everything `meminit run` was asked, typed; each scenario reads its own fields.

    The defaults here are the command's defaults (commands/run.py reads them from here).
    """

    scenarios: list[str]
    kernels: list[str] = field(default_factory=lambda: ["series", "base"])
    linux: Linux = LTS  # which kernel's base and series (--linux; the LTS by default)
    tree: own_tree.OwnTree | None = None  # --tree: the user's own tree's two commits instead
    guest: vm.GuestRequest = field(default_factory=vm.GuestRequest)  # timeout None: TIMEOUT_S
    jobs: int | None = None
    # memmap scenarios
    variants: list[str] = field(default_factory=lambda: ["all"])
    pmem_size: int = 2 * GIB
    init_threads: int | None = None
    rebinds: int = 5
    replay: bool = True  # the bench's replay of each memmap on this CPU (memmap_replay)
    replay_reps: int = memmap_replay.REPS
    # fork
    fork_vmas: list[int] = field(default_factory=lambda: list(forkbench.DEFAULT_COUNTS))
    fork_seconds: float = 2.0
    fork_reps: int = 3
    # thp-fault
    fault_size: int = 1 * GIB
    fault_reps: int = 3
    # fault-latency (a unit of "default" is the kernel's own choice)
    preempt: list[str] = field(default_factory=lambda: ["none", "voluntary", "full"])
    latency_units: list[str] = field(default_factory=lambda: ["default", "4K", "2M", "32M"])
    latency_seconds: int = 10
    latency_rounds: int = 2
    latency_hog: list[str] = field(default_factory=lambda: ["off", "on"])
    latency_trace: int = 0


@dataclass(frozen=True)
class Boot:
    """One guest of a scenario: the kernel it boots and what sets it apart (e.g. a preemption model)."""

    kernel: str
    name: str
    parameters: tuple[str, ...] = ()
    cpus: int | None = None  # None: the request's
    detail: str = ""  # what the scenario needs to tell boots of one kernel apart


class Scenario(ABC):
    """One scenario of `meminit run`; `kind` names its entries in result.json."""

    name: str
    kind: str
    help: str
    plot_file: str
    # The kernels whose series it measures something of, and why not the others; a run
    # on another is refused before anything is built.
    linux_versions: tuple[str, ...] = tuple(KERNELS)
    elsewhere: str = ""

    def guest_memory(self, req: RunRequest) -> int:
        """Guest RAM; refuses sizes the guest cannot hold before anything is built."""
        return req.guest.memory or vm.DEFAULT_MEMORY

    def boot_parameters(self, req: RunRequest) -> list[str]:
        """Kernel parameters every guest of this scenario needs."""
        return []

    def boots(self, req: RunRequest) -> list[Boot]:
        """One guest per kernel, in the order asked."""
        params = tuple(self.boot_parameters(req))
        return [Boot(kernel=k, name=f"{self.name}-{k}", parameters=params) for k in req.kernels]

    @abstractmethod
    def guest_script(self, req: RunRequest, boot: Boot, run_dir: Path) -> str:
        """The bash the guest runs, in the shared run directory."""

    @abstractmethod
    def collect(self, req: RunRequest, boot: Boot, result: vm.BootResult, run_dir: Path) -> list[dict]:
        """The samples of one boot, from what the guest wrote."""

    @abstractmethod
    def entry(self, req: RunRequest, samples: dict[Boot, list[dict]]) -> dict:
        """This scenario's entry of result.json (name and kind added by the caller)."""

    @abstractmethod
    def render(self, entries: list[dict], result: dict) -> str:
        """The terminal table of every entry of this kind in a run."""

    @abstractmethod
    def plot(self, entries: list[dict], result: dict, out: Path) -> Path:
        """The figure of every entry of this kind in a run."""

    def run(self, req: RunRequest, kernels: dict[str, build.Kernel], run_dir: Path, accel: str) -> dict:
        """Boot every planned guest, collect its samples, and return this scenario's entry."""
        samples: dict[Boot, list[dict]] = {}
        for boot in self.boots(req):
            script = run_dir / f"{boot.name}.sh"
            script.write_text(self.guest_script(req, boot, run_dir))
            spec = vm.BootSpec(image=kernels[boot.kernel].image, name=boot.name, kernel=boot.kernel,
                               script=f"bash {shlex.quote(str(script))}",
                               memory_bytes=self.guest_memory(req), cpus=boot.cpus or req.guest.cpus,
                               append=[*boot.parameters, vm.SKIP_KUNIT, *req.guest.append],
                               timeout_s=req.guest.timeout or TIMEOUT_S)
            result = vm.boot_script(spec, run_dir, accel, output=self.output(boot, run_dir))
            samples[boot] = self.collect(req, boot, result, run_dir)
        return {"name": self.name, "kind": self.kind, **self.entry(req, samples)}

    def output(self, boot: Boot, run_dir: Path) -> Path | None:
        """The file the guest writes its samples to, named when the script fails."""
        return None
