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
        assert {i.name for i in found} >= {"template-heads-short", "streaming-corrupts"}
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


def test_the_injections_apply_to_their_stack(kernel_trees):
    """Each committed injection made for the tree's stack (the default one, or the RFC parts
    it carries) applies to it (git apply --check)."""
    for injection in injections.of(kernel_trees.linux):
        checked = proc.run(["git", "-C", str(kernel_trees.series), "apply", "--check", str(injection.path)],
                           check=False)
        assert checked.returncode == 0, (injection.name, checked.stderr)


@pytest.mark.parametrize("version", sorted(kernels.KERNELS))
def test_each_stack_has_its_own_injections_and_a_name_of_another_stack_is_refused(version):
    """The RFCs' injections (a `Stack:` line) run with --rfc threads,auto only, the core's
    without it; naming one on the wrong stack says which it needs."""
    linux = kernels.get(version)
    rfc = linux.with_rfcs(("threads", "auto"))
    default, rfcs = injections.of(linux), injections.of(rfc)
    assert default and rfcs and not {i.name for i in default} & {i.name for i in rfcs}
    assert all(i.stack == () for i in default) and all(i.stack == ("threads", "auto") for i in rfcs)
    assert {i.name for i in rfcs} >= {"threads-helper-writes-nothing", "auto-switch-margin-ignored"}
    with pytest.raises(MeminitError, match=r"threads-flush-work \(--rfc threads,auto\)"):
        injections.of(linux, ("threads-flush-work",))
    with pytest.raises(MeminitError, match=r"template-heads-short \(the default stack\)"):
        injections.of(rfc, ("template-heads-short",))
    with pytest.raises(MeminitError, match="no injection of .* is made for --rfc threads"):
        injections.of(linux.with_rfcs(("threads",)))


def test_a_stack_line_names_the_rfc_parts(tmp_path):
    path = tmp_path / "x.diff"
    path.write_text("Injected bug: a thing\nExpect: s.a\nStack: threads, auto\n\ndiff --git a/f b/f\n")
    assert injections.read(path).stack == ("threads", "auto")
    path.write_text("Injected bug: a thing\nExpect: s.a\n\ndiff --git a/f b/f\n")
    assert injections.read(path).stack == ()
