"""The harness's shape (issue 16): imports run one way, down through the folders' layers; none is
dodged inside a function; no module grows past MAX_LINES; tools run through proc; no local
name hides an imported module; only the command line (commands/, cli.py) sees argparse."""

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "meminit"
MAX_LINES = 400

# Lowest first: the folders of src/meminit (and the command line's top-level modules). A
# module may import its own folder or a folder of a lower layer, never a higher one, and
# never another folder of its own layer (guest, host and bench stand beside each other).
LAYERS = {
    "core": {"core"},
    "kernel": {"kernel"},
    "libraries": {"guest", "host", "bench"},
    "scenarios": {"scenarios"},
    "commands": {"commands"},
}
# proc runs every tool; vm.boot alone drives its child itself (the guest's timeout, the console copy)
SUBPROCESS_USERS = {"core.proc", "guest.vm"}
# the command line: each command parses its options into a request or plain arguments for a library
ARGPARSE_USERS = {"cli", "commands"}
RANK = {folder: rank for rank, folders in enumerate(LAYERS.values()) for folder in folders}


# the package's own top-level modules: the command line's entry points
COMMAND_LINE = {"cli", "__main__", "__init__"}


def folder_of(module: str) -> str:
    """core.units -> core; cli -> commands: the folder a module lives in (the top-level
    entry points count as the command line's); any other top-level module is its own."""
    top = module.split(".")[0]
    return "commands" if top in COMMAND_LINE else top


def rank_of(module: str) -> int:
    return RANK.get(folder_of(module), 99)


def is_module(name: str) -> bool:
    path = PACKAGE.joinpath(*name.split("."))
    return path.with_suffix(".py").exists() or path.is_dir()


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def meminit_imports(tree: ast.AST, module: str = "") -> list[tuple[ast.AST, str]]:
    """(node, imported module) for every import of a meminit module at any depth: absolute,
    relative (resolved against `module`), and importlib.import_module("meminit...")."""
    parts = module.split(".") if module else []
    package = parts if (PACKAGE.joinpath(*parts)).is_dir() else parts[:-1]  # what `.` means here
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                up = package[:len(package) - (node.level - 1)]
                base = ".".join([*up, *([node.module] if node.module else [])])
            elif node.module and node.module.split(".")[0] == "meminit":
                base = node.module.removeprefix("meminit").lstrip(".")
            else:
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}" if base else alias.name
                found.append((node, sub if is_module(sub) else base))
        elif isinstance(node, ast.Import):
            found += [(node, a.name.removeprefix("meminit.")) for a in node.names if a.name.startswith("meminit.")]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module" and node.args
              and isinstance(node.args[0], ast.Constant) and str(node.args[0].value).startswith("meminit.")):
            found.append((node, str(node.args[0].value).removeprefix("meminit.")))
    return found


def import_graph() -> dict[str, set[str]]:
    graph = {}
    for name, path in modules().items():
        tree = ast.parse(path.read_text())
        graph[name] = {target for _, target in meminit_imports(tree, name) if target and target != name}
    return graph


def test_every_module_has_a_layer():
    assert sorted(m for m in modules() if folder_of(m) not in RANK) == []


def test_imports_run_down_the_layers():
    """Down to a lower layer, or within the module's own folder; never up, never sideways."""
    wrong = [f"{m} ({layer_of(m)}) imports {t} ({layer_of(t)})"
             for m, targets in import_graph().items() for t in targets
             if folder_of(t) != folder_of(m) and rank_of(t) >= rank_of(m)]
    assert wrong == []


def layer_of(module: str) -> str:
    return list(LAYERS)[rank_of(module)] if folder_of(module) in RANK else "?"


def test_no_import_circle():
    graph = import_graph()
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for t in sorted(graph.get(m, ())):
            if state.get(t) == 1:
                pytest.fail("import circle: " + " -> ".join(stack[stack.index(t):] + [t]))
            if t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)


def test_no_meminit_import_inside_a_function():
    hidden = []
    for name, path in modules().items():
        tree = ast.parse(path.read_text())
        top = {id(n) for n in tree.body}
        hidden += [f"{name}:{node.lineno}" for node, _ in meminit_imports(tree, name)
                   if id(node) not in top and not isinstance(node, ast.Call)]
    assert hidden == []


def test_no_module_is_oversized():
    big = {name: len(path.read_text().splitlines()) for name, path in modules().items()}
    assert {n: lines for n, lines in big.items() if lines > MAX_LINES} == {}


def test_tools_run_through_proc():
    """No subprocess (however imported) and no os.system/os.popen outside SUBPROCESS_USERS."""
    direct = []
    for name, path in modules().items():
        if name in SUBPROCESS_USERS:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import) and any(a.name == "subprocess" and a.asname for a in node.names):
                direct.append(f"{name}:{node.lineno} import subprocess as ...")
            elif isinstance(node, ast.ImportFrom) and node.module == "subprocess":
                direct.append(f"{name}:{node.lineno} from subprocess import ...")
            elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                  and (node.value.id, node.attr) in {("os", "system"), ("os", "popen")}
                  | {("subprocess", f) for f in ("run", "Popen", "call", "check_call", "check_output",
                                                 "getoutput", "getstatusoutput")}):
                direct.append(f"{name}:{node.lineno} {node.value.id}.{node.attr}")
    assert direct == []


def test_only_the_command_line_sees_argparse():
    """No module outside commands/ and cli.py imports argparse (however: import, from, in a
    function, importlib), so no library takes an argparse.Namespace."""
    found = []
    for name, path in modules().items():
        if name.split(".")[0] in ARGPARSE_USERS:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if ((isinstance(node, ast.Import) and any(a.name.split(".")[0] == "argparse" for a in node.names))
                    or (isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "argparse")
                    or (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                        and node.func.attr == "import_module" and node.args
                        and isinstance(node.args[0], ast.Constant) and node.args[0].value == "argparse")):
                found.append(f"{name}:{node.lineno}")
    assert found == []


def bound_names(function: ast.AST) -> set[str]:
    """Names a function binds: its arguments, assignments, loop and with targets."""
    names = {a.arg for a in ast.walk(function) if isinstance(a, ast.arg)}
    names |= {n.id for n in ast.walk(function) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return names


def test_no_local_hides_an_imported_module():
    """`proc = verify(...)` in a function that also calls proc.stream() breaks the call."""
    hidden = []
    for name, path in modules().items():
        tree = ast.parse(path.read_text())
        imported = {alias.asname or alias.name for node in tree.body if isinstance(node, ast.ImportFrom)
                    and (node.level or (node.module or "").split(".")[0] == "meminit")
                    for alias in node.names if alias.name in {m.split(".")[-1] for m in modules()}}
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                hidden += [f"{name}.{fn.name}: {n}" for n in sorted(bound_names(fn) & imported)]
    assert hidden == []


def test_the_checks_can_fail(tmp_path, monkeypatch):
    """Each check above catches its fault in a fake package: a library importing a command
    (relatively), a circle, an import hidden in a function, a library importing argparse, an
    unknown module, a big one."""
    fake = tmp_path / "meminit"
    for folder in ("core", "guest", "host", "bench", "scenarios"):
        (fake / folder).mkdir(parents=True)
    (fake / "core" / "units.py").write_text("from meminit.guest import vm\n")
    (fake / "guest" / "vm.py").write_text("from ..core import units\nfrom .selftests import x\n")
    (fake / "guest" / "selftests.py").write_text("def f():\n    from meminit.guest import vm\n")
    (fake / "host" / "devices.py").write_text("from meminit.bench import benchbin\n")
    (fake / "bench" / "benchbin.py").write_text("")
    (fake / "core" / "proc.py").write_text("")
    (fake / "scenarios" / "base.py").write_text("from ..scenarios import memmap\n")
    (fake / "scenarios" / "memmap.py").write_text("import importlib\nimportlib.import_module('meminit.cli')\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", fake)
    graph = import_graph()
    assert graph == {"core.units": {"guest.vm"}, "guest.vm": {"core.units", "guest.selftests"},
                     "guest.selftests": {"guest.vm"}, "host.devices": {"bench.benchbin"}, "bench.benchbin": set(),
                     "core.proc": set(),
                     "scenarios.base": {"scenarios.memmap"}, "scenarios.memmap": {"cli"}}
    for check in (test_imports_run_down_the_layers, test_no_meminit_import_inside_a_function):
        with pytest.raises(AssertionError):
            check()
    (fake / "core" / "units.py").write_text("")
    with pytest.raises(AssertionError, match="host.devices .libraries. imports bench.benchbin"):
        test_imports_run_down_the_layers()  # sideways, within a layer
    with pytest.raises(pytest.fail.Exception):
        test_no_import_circle()
    (fake / "commands").mkdir()
    (fake / "commands" / "run.py").write_text("import argparse\n")
    (fake / "cli.py").write_text("from argparse import Namespace\n")
    test_only_the_command_line_sees_argparse()  # the command line may
    for sneaky in ("import argparse\n", "from argparse import Namespace\n", "def f(args):\n    import argparse\n",
                   "import importlib\nimportlib.import_module('argparse')\n"):
        (fake / "sneaky.py").write_text(sneaky)
        with pytest.raises(AssertionError):
            test_only_the_command_line_sees_argparse()
    (fake / "sneaky.py").unlink()
    (fake / "newthing.py").write_text("import subprocess\nfrom meminit.core import proc\n\n\n"
                                      "def f():\n    proc = subprocess.run(['true'])\n"
                                      + "x = 1\n" * MAX_LINES)
    for sneaky in ("from subprocess import run\n", "import subprocess as sp\n", "import os\nos.system('x')\n"):
        (fake / "sneaky.py").write_text(sneaky)
        with pytest.raises(AssertionError):
            test_tools_run_through_proc()
    (fake / "sneaky.py").unlink()
    for check in (test_every_module_has_a_layer, test_no_module_is_oversized, test_tools_run_through_proc,
                  test_no_local_hides_an_imported_module):
        with pytest.raises(AssertionError):
            check()
