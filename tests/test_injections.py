"""The committed injected bugs (issue 66, item 7): their files, and when one counts as caught."""

from __future__ import annotations

import pytest

from meminit.core import kernels, paths, proc
from meminit.core.errors import MeminitError
from meminit.guest import injections, ktap


def _report(*cases):
    return ktap.KunitReport(ok=False, cases=[ktap.KunitCase(s, n, st) for s, n, st in cases], summary="")


@pytest.mark.parametrize("version", sorted(kernels.KERNELS))
def test_every_committed_injection_reads_and_names_its_suite(version):
    found = injections.of(kernels.get(version))
    if version == kernels.MAINLINE.version:
        assert {i.name for i in found} >= {"template-heads-short", "streaming-corrupts", "streaming-unreported"}
    suites = set(ktap.required_suites(kernels.get(version)))
    for injection in found:
        assert injection.suite in suites, injection
        diff = injection.path.read_text()
        # every injection is one small edit of a file the series itself adds or changes
        assert diff.count("\n+") - diff.count("\n+++") <= 3, injection


def test_caught_only_when_every_expected_case_fails(tmp_path):
    path = tmp_path / "x.diff"
    path.write_text("Injected bug: a thing\nExpect: s.a,s.b\n\ndiff --git a/f b/f\n")
    injection = injections.read(path)
    assert (injection.suite, injection.expect) == ("s", ("s.a", "s.b"))
    assert injections.verdict(injection, _report(("s", "a", "FAIL"), ("s", "b", "FAIL")), []).caught
    half = injections.verdict(injection, _report(("s", "a", "FAIL"), ("s", "b", "PASS")), [])
    assert not half.caught and half.how == "s.a FAIL, s.b PASS"
    assert not injections.verdict(injection, _report(("s", "a", "FAIL")), []).caught   # s.b never ran
    assert injections.verdict(injection, None, ["BUG: kernel NULL pointer dereference"]).caught


def test_an_injection_file_says_what_it_breaks_and_one_suite_it_fails(tmp_path):
    path = tmp_path / "x.diff"
    for text in ("Expect: s.a\ndiff --git a/f b/f\n", "Injected bug: x\nExpect: s.a,t.b\ndiff --git a/f b/f\n",
                 "Injected bug: x\nExpect: s.a\n"):
        path.write_text(text)
        with pytest.raises(MeminitError):
            injections.read(path)
    with pytest.raises(MeminitError, match="no injection nope"):
        injections.of(kernels.MAINLINE, ("nope",))


def test_the_injections_apply_to_the_default_stack(kernel_trees):
    """Each committed injection applies to the series it breaks (git apply --check)."""
    if kernel_trees.linux.rfcs:
        pytest.skip(f"the tree carries {', '.join(kernel_trees.linux.rfcs)}: the injections are made for the "
                    "default stack, which `meminit test` without --rfc checks")
    for injection in injections.of(kernel_trees.linux):
        checked = proc.run(["git", "-C", str(kernel_trees.series), "apply", "--check", str(injection.path)],
                           check=False)
        assert checked.returncode == 0, (injection.name, checked.stderr)
