"""check-configs: target groups, touched directories, the compile matrix."""

from __future__ import annotations

from meminit import configs


def test_groups_expand_and_the_default_is_the_kunit_targets():
    assert configs.expand_targets([]) == list(configs.TARGETS)
    assert configs.expand_targets(["compile"]) == list(configs.COMPILE_TARGETS)
    assert configs.expand_targets(["um", "all"])[0] == "um"
    assert len(configs.expand_targets(["all", "um"])) == len(configs.TARGETS) + len(configs.COMPILE_TARGETS)


def test_every_compile_fragment_belongs_to_a_target():
    names = {f.stem for f in configs.COMPILE_CONFIG_DIR.glob("*.config")}
    assert names <= set(configs.COMPILE_TARGETS)
    assert configs.COMPILE_TARGETS["riscv64"].srcarch == "riscv"
    assert configs.COMPILE_TARGETS["allmodconfig"].srcarch == "x86"


def test_touched_dirs_leave_out_other_architectures():
    objects = ["arch/x86/lib/a.o", "lib/b.o", "mm/c.o", "mm/d.o"]
    assert configs.touched_dirs(objects, "x86") == ["arch/x86/lib", "lib", "mm"]
    assert configs.touched_dirs(objects, "riscv") == ["lib", "mm"]


def test_matrix_says_built_or_not_selected_per_config():
    results = [configs.CompileResult("debian-amd64", ["mm/mm_init.o"], ["lib/x_kunit.o"], [], 61.0),
               configs.CompileResult("riscv64", ["mm/mm_init.o", "lib/x_kunit.o"], [], [], 42.0)]
    table = configs.compile_matrix(results)
    lines = table.splitlines()
    assert "debian-amd64" in lines[0] and "riscv64" in lines[0]
    row = next(line for line in lines if line.startswith("lib/x_kunit.o"))
    assert "not selected" in row and row.rstrip().endswith("built")
    assert lines[-1].split()[-2:] == ["61", "42"]
