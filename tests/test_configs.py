"""check-configs: target groups, touched directories, the compile matrix."""

from __future__ import annotations

from meminit.core import kernels
from meminit.guest import configs, ktap
from meminit.kernel import compile_checks


def test_the_default_group_is_per_kernel_the_target_that_shows_the_most():
    """check-configs' default (group kunit, which CI runs), as docs/check-configs.md says: arm64
    on both kernels (6.12: every suite on the generic clearing, under PREEMPT_NONE; 7.3: the
    head-pointer encoding of compound tails); the others by name or in `all`."""
    assert configs.groups(kernels.LTS)["kunit"] == ["arm64"]
    assert configs.groups(kernels.MAINLINE)["kunit"] == ["arm64"]
    assert all(t.must_say == configs.POINTER_ENCODING for n, t in configs.MAINLINE_TARGETS.items() if t.in_kunit_group)
    assert len(configs.groups(kernels.MAINLINE)["all"]) == (len(configs.MAINLINE_TARGETS) + 1  # x86_64-modules
                                                           + len(compile_checks.MAINLINE_COMPILE_TARGETS))


def test_groups_expand_and_the_default_is_the_kunit_targets():
    grouped = [n for n, t in configs.TARGETS.items() if t.in_kunit_group]
    assert configs.expand_targets([]) == grouped and "x86_64-kasan" not in grouped
    assert configs.expand_targets(["compile"]) == list(compile_checks.COMPILE_TARGETS)
    assert configs.expand_targets(["um", "all"])[0] == "um"
    assert len(configs.expand_targets(["all", "um"])) == len(configs.TARGETS) + 1 + len(compile_checks.COMPILE_TARGETS)
    assert "x86_64-modules" in configs.expand_targets(["all"]) and "x86_64-modules" not in grouped


def test_every_compile_fragment_belongs_to_a_target():
    names = {f.stem for f in compile_checks.COMPILE_CONFIG_DIR.glob("*.config")}
    assert names <= set(compile_checks.COMPILE_TARGETS)
    assert compile_checks.COMPILE_TARGETS["riscv64"].srcarch == "riscv"
    assert compile_checks.COMPILE_TARGETS["allmodconfig"].srcarch == "x86"


def test_touched_dirs_leave_out_other_architectures():
    objects = ["arch/x86/lib/a.o", "lib/b.o", "mm/c.o", "mm/d.o"]
    assert compile_checks.touched_dirs(objects, "x86") == ["arch/x86/lib", "lib", "mm"]
    assert compile_checks.touched_dirs(objects, "riscv") == ["lib", "mm"]


def test_matrix_says_built_or_not_selected_per_config():
    results = [compile_checks.CompileResult("debian-amd64", ["mm/mm_init.o"], ["lib/x_kunit.o"], [], 61.0),
               compile_checks.CompileResult("riscv64", ["mm/mm_init.o", "lib/x_kunit.o"], [], [], 42.0)]
    table = compile_checks.compile_matrix(results)
    lines = table.splitlines()
    assert "debian-amd64" in lines[0] and "riscv64" in lines[0]
    row = next(line for line in lines if line.startswith("lib/x_kunit.o"))
    assert "not selected" in row and row.rstrip().endswith("built")
    assert lines[-1].split()[-2:] == ["61", "42"]


def test_clang_targets_build_with_llvm_and_gcc_ones_with_their_cross_compiler(tmp_path):
    kmsan = compile_checks.make_command(compile_checks.COMPILE_TARGETS["kmsan"], tmp_path, 2, ["mm/"])
    assert "LLVM=-16" in kmsan and "CC=ccache clang-16" in kmsan
    assert not any(a.startswith("CROSS_COMPILE") for a in kmsan)
    riscv = compile_checks.make_command(compile_checks.COMPILE_TARGETS["riscv64"], tmp_path, 2, ["mm/"])
    assert "CROSS_COMPILE=riscv64-linux-gnu-" in riscv and "CC=ccache riscv64-linux-gnu-gcc" in riscv
    assert not any(a.startswith("LLVM") for a in riscv)


def test_each_kernel_compiles_in_its_own_build_root_with_a_clang_it_accepts():
    """7.3 refuses clang older than 17 (bookworm's default clang-16): its KMSAN target takes
    clang-19; its builds and Debian config are its own, never 6.12's."""
    lts, mainline = compile_checks.COMPILE_TARGETS, compile_checks.MAINLINE_COMPILE_TARGETS
    assert list(lts) == list(mainline)
    assert lts["kmsan"].llvm == "-16" and mainline["kmsan"].llvm == "-19"
    assert "clang-19" in mainline["kmsan"].packages and "lld-19" in mainline["kmsan"].packages
    assert mainline["allmodconfig"].build_dir == kernels.MAINLINE.build_root / "compile-allmodconfig"
    assert lts["allmodconfig"].build_dir != mainline["allmodconfig"].build_dir
    assert configs.groups(kernels.MAINLINE)["compile"] == list(mainline)
    assert compile_checks.config_package(kernels.MAINLINE) == "linux-config-7.3"


def test_a_target_that_must_report_a_fallback_fails_without_the_skip():
    target = configs.TARGETS["x86_64-kasan"]
    passed = ktap.KunitReport(ok=True, summary="", cases=[
        ktap.KunitCase(suite=s, name="x", status="PASS") for s in target.suites])
    assert configs.check(target, passed, "    ok 1 zdm_fast_matches_slow\n") != []
    skipped = f"    ok 1 zdm_fast_matches_slow # SKIP {target.fallback_reason}\n"
    assert configs.check(target, passed, skipped) == []


def test_a_case_the_target_exists_to_run_must_pass_not_skip():
    target = configs.TARGETS["x86_64-sparsemem"]
    cases = [ktap.KunitCase(suite=s, name=f"{s}_x", status="PASS") for s in target.suites]
    skipped = ktap.KunitReport(ok=True, summary="", cases=[
        *cases, ktap.KunitCase(suite="folio_zero_user", name="folio_zero_user_gigantic", status="SKIP")])
    assert configs.check(target, skipped) == [
        "x86_64-sparsemem: folio_zero_user_gigantic SKIP, and this target exists to run it"]
    passed = ktap.KunitReport(ok=True, summary="", cases=[
        *cases, ktap.KunitCase(suite="folio_zero_user", name="folio_zero_user_gigantic", status="PASS")])
    assert configs.check(target, passed) == []
