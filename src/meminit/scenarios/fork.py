"""The fork scenario: forkbench in the guest, forks/s of a process with N VMAs (maple tree __mt_dup())."""

from __future__ import annotations

import shlex
from pathlib import Path

from meminit.bench import forkbench
from meminit.core import results
from meminit.guest import vm
from meminit.scenarios.base import Boot, RunRequest, Scenario


class ForkScenario(Scenario):
    name = "fork"
    kind = "fork"
    help = "forkbench: forks/s with N extra VMAs"
    plot_file = "fork.png"

    def output(self, boot: Boot, run_dir: Path) -> Path:
        return run_dir / f"fork-{boot.kernel}.jsonl"

    def guest_script(self, req: RunRequest, boot: Boot, run_dir: Path) -> str:
        command = forkbench.forkbench_command(forkbench.build_forkbench(), req.fork_vmas, req.fork_seconds, reps=req.fork_reps)
        return f"{command} > {shlex.quote(str(self.output(boot, run_dir)))}\n"

    def collect(self, req: RunRequest, boot: Boot, result: vm.BootResult, run_dir: Path) -> list[dict]:
        return forkbench.parse_forkbench(self.output(boot, run_dir).read_text())

    def entry(self, req: RunRequest, samples: dict[Boot, list[dict]]) -> dict:
        return {"runs": {boot.kernel: rows for boot, rows in samples.items()}}

    def render(self, entries: list[dict], result: dict) -> str:
        lines = []
        for entry in entries:
            for kernel, rows in entry["runs"].items():
                lines += [f"fork: {kernel} kernel", forkbench.fork_table(rows), ""]
        return "\n".join(lines).rstrip()

    def plot(self, entries: list[dict], result: dict, out: Path) -> Path:
        runs = {k: rows for entry in entries for k, rows in entry["runs"].items()}
        forkbench.plot_forks(runs, out, results.accel_title("fork with N VMAs", result.get("accel")))
        return out


SCENARIO = ForkScenario()
