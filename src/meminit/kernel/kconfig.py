"""The trimmed kernel config: tinyconfig + our fragments, then a check that nothing was dropped."""

from __future__ import annotations

import hashlib
import re
import sys
from pathlib import Path

from meminit.core import kernels, paths, proc
from meminit.core.errors import MeminitError
from meminit.core.kernels import Linux

COMMON_FRAGMENT = paths.CONFIG_DIR / "meminit.config"
SERIES_FRAGMENT = paths.CONFIG_DIR / "series.config"
DEBUG_FRAGMENT = paths.CONFIG_DIR / "debug.config"
KUNIT_MODULES_FRAGMENT = paths.CONFIG_DIR / "kunit-modules.config"

_LINE = re.compile(r"^(CONFIG_[A-Za-z0-9_]+)=(.*)$")
_UNSET = re.compile(r"^# (CONFIG_[A-Za-z0-9_]+) is not set$")


def parse_config(text: str) -> dict[str, str]:
    """Map option -> value ('n' for '# CONFIG_X is not set' and for '=n')."""
    options: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if m := _LINE.match(line):
            options[m.group(1)] = m.group(2)
        elif m := _UNSET.match(line):
            options[m.group(1)] = "n"
    return options


def dropped_options(wanted: dict[str, str], final: dict[str, str]) -> list[str]:
    """Options of the fragments whose value did not survive olddefconfig, as 'CONFIG_X=want (got)'."""
    problems = []
    for name, want in wanted.items():
        got = final.get(name, "n")
        if got != want:
            problems.append(f"{name}={want} (olddefconfig left {'it unset' if got == 'n' else got})")
    return problems


def fragments_for(variant: str, linux: Linux = kernels.DEFAULT) -> list[Path]:
    """base: meminit.config; series: + series.config; debug: the series + debug.config;
    kunit-modules (check-configs x86_64-modules): debug + kunit-modules.config. Each
    shared fragment is followed by the kernel's own of the same name, if any
    (config/VERSION/NAME: what exists on one kernel only), which may override it."""
    if variant == "base":
        shared = [COMMON_FRAGMENT]
    elif variant == "series":
        shared = [COMMON_FRAGMENT, SERIES_FRAGMENT]
    elif variant == "debug":
        shared = [COMMON_FRAGMENT, SERIES_FRAGMENT, DEBUG_FRAGMENT]
    elif variant == "kunit-modules":
        shared = [COMMON_FRAGMENT, SERIES_FRAGMENT, DEBUG_FRAGMENT, KUNIT_MODULES_FRAGMENT]
    else:
        raise ValueError(f"unknown kernel variant {variant!r}")
    return [f for frag in shared for f in (frag, linux.own_config(frag.name)) if f.exists()]


def wanted_options(fragments: list[Path]) -> dict[str, str]:
    wanted: dict[str, str] = {}
    for fragment in fragments:
        wanted.update(parse_config(fragment.read_text()))
    return wanted


def _stamp(out: Path) -> Path:
    return out / ".meminit-config-stamp"


def forget_configuration(out: Path) -> None:
    """Make the next configure() start again from tinyconfig + fragments."""
    _stamp(out).unlink(missing_ok=True)


def reconfigure(src: Path, out: Path, config: str) -> None:
    """Write config to out/.config and let olddefconfig fit it to the tree's Kconfig files."""
    (out / ".config").write_text(config)
    _run(["make", "-s", "-C", str(src), f"O={out}", "olddefconfig"])


def configure(src: Path, out: Path, fragments: list[Path], optional: list[Path] | None = None) -> None:
    """Write out/.config from tinyconfig + fragments unless the fragments are unchanged; every
    option of `fragments` must survive, those of `optional` are merged after them and kept
    where the tree has them."""
    out.mkdir(parents=True, exist_ok=True)
    optional = optional or []
    digest = hashlib.sha256(b"".join(f.read_bytes() for f in fragments)
                            + b"".join(b"optional:" + f.read_bytes() for f in optional)).hexdigest()
    stamp = _stamp(out)
    config = out / ".config"
    fresh = not (config.exists() and stamp.exists() and stamp.read_text() == digest)
    while True:
        if fresh:
            print(f"meminit: configuring {out.name}: tinyconfig + {', '.join(map(_shown, fragments))}"
                  + (f" (where the tree has them: {', '.join(map(_shown, optional))})" if optional else ""),
                  file=sys.stderr, flush=True)
            _run(["make", "-s", "-C", str(src), f"O={out}", "tinyconfig"])
            _run([str(src / "scripts/kconfig/merge_config.sh"), "-m", "-O", str(out), str(config),
                  *map(str, fragments), *map(str, optional)], cwd=src)
        _run(["make", "-s", "-C", str(src), f"O={out}", "olddefconfig"])
        problems = dropped_options(wanted_options(fragments), parse_config(config.read_text()))
        if not problems:
            break
        stamp.unlink(missing_ok=True)
        if fresh:
            raise MeminitError("required kernel options were dropped by their dependencies:\n  "
                               + "\n  ".join(problems) + f"\n(config: {config})")
        # the fragments are unchanged, but a make in `out` at another state of the tree (a
        # commit before the options existed) let olddefconfig drop them from the .config
        print(f"meminit: {config} lost options the fragments require ({'; '.join(problems)}): "
              f"configuring again", file=sys.stderr, flush=True)
        fresh = True
    stamp.write_text(digest)


def _shown(fragment: Path) -> str:
    """config/6.12/meminit.config as 6.12/meminit.config: which kernel's fragment it is."""
    return str(fragment.relative_to(paths.CONFIG_DIR)) if fragment.is_relative_to(paths.CONFIG_DIR) else fragment.name


def _run(cmd: list[str], cwd: Path | None = None) -> None:
    proc.run(cmd, cwd=cwd)
