"""The core's KUnit hooks, absent from a kernel built without its suite (nm of the objects).

The core builds entry points for its KUnit suite (memmap_init_zone_device_mode(), ...) and
exports them and the mm internals the suite calls with EXPORT_SYMBOL_IF_KUNIT(), all inside
`#if IS_ENABLED(SUITE_OPTION)`, not CONFIG_KUNIT: a kernel with KUnit but not the suite (KUnit
as modules, as distributions build it) must carry none of them. check-configs' debian-kunit-off
target compiles the touched objects so, and `hidden_problems()` reads their symbols: an export
(`__export_symbol_NAME` from 6.13 on, `__ksymtab_NAME` before) of a name the core passes to
EXPORT_SYMBOL_IF_KUNIT(), or a definition of a function the core builds for the suite only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from meminit.core import proc
from meminit.kernel import series_size

SUITE_OPTION = "CONFIG_ZONE_DEVICE_MEMMAP_KUNIT_TEST"
_EXPORT = re.compile(r"\bEXPORT_SYMBOL_IF_KUNIT\((\w+)\)")
# a function definition: its name at the start of a line (or after its return type), its
# parameters (over several lines), then the opening brace on a line of its own
_DEFINITION = re.compile(r"^(?:\w[\w \t*]*[ \t*])?(\w+)\([^;{]*\)\s*\n\{", re.M)
_EXPORT_MARKS = ("__export_symbol_", "__ksymtab_")
_DEFINED_TYPES = set("TtDdRrBbVvWw")


@dataclass(frozen=True)
class Hooks:
    exported: tuple[str, ...]  # the names passed to EXPORT_SYMBOL_IF_KUNIT()
    entry_points: tuple[str, ...]  # functions defined inside #if IS_ENABLED(SUITE_OPTION)


def _added_c_lines(patch_text: str) -> list[str]:
    """The lines a patch adds to C files and headers, without their `+`."""
    return [line for path, sign, line in series_size.changed_lines(patch_text)
            if sign == "+" and path.endswith((".c", ".h"))]


def _guarded_blocks(lines: list[str]) -> list[str]:
    """The text of each `#if IS_ENABLED(SUITE_OPTION)` block among the lines, nested
    conditionals included."""
    blocks: list[str] = []
    depth = 0
    current: list[str] = []
    for line in lines:
        directive = line.lstrip()
        if depth:
            if directive.startswith("#if"):
                depth += 1
            elif directive.startswith("#endif"):
                depth -= 1
            if depth:
                current.append(line)
            else:
                blocks.append("\n".join(current) + "\n")
                current = []
        elif directive.startswith("#if") and SUITE_OPTION in directive:
            depth = 1
    return blocks


def core_hooks(patches: list[Path]) -> Hooks:
    """What the core's patches build or export for the KUnit suite only."""
    lines = [line for patch in patches for line in _added_c_lines(patch.read_text())]
    exported = dict.fromkeys(m[1] for line in lines for m in _EXPORT.finditer(line))
    entry = dict.fromkeys(m[1] for block in _guarded_blocks(lines) for m in _DEFINITION.finditer(block))
    return Hooks(exported=tuple(exported), entry_points=tuple(entry))


def problems(nm_by_object: dict[str, str], hooks: Hooks) -> list[str]:
    """Each hook the objects' nm output shows, named with its object."""
    found: list[str] = []
    for obj, text in nm_by_object.items():
        for line in text.splitlines():
            fields = line.split()
            if len(fields) < 2:
                continue
            kind, name = fields[-2], fields[-1]
            exported = next((name[len(m):] for m in _EXPORT_MARKS if name.startswith(m)), None)
            if exported in hooks.exported:
                found.append(f"{obj} exports {exported} to the KUnit suite, which is not built")
            elif name in hooks.entry_points and kind in _DEFINED_TYPES:
                found.append(f"{obj} defines {name}, an entry point of the KUnit suite, which is not built")
    return found


def hidden_problems(build_dir: Path, objects: list[str], hooks: Hooks) -> list[str]:
    """problems() of the built objects, read with nm."""
    nm = {obj: proc.run(["nm", str(build_dir / obj)]).stdout for obj in objects}
    return problems(nm, hooks)
