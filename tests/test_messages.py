"""Every mailed patch's message is a changelog (issue 66): at most about the length of the
folio_zero_user() commit mm took (124 lines), with no path outside the kernel tree."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from meminit.core import kernels, paths
from meminit.kernel import parts

MAX_LINES = 124
# the harness's own folders, which no kernel reader has
OUTSIDE_PATHS = re.compile(r"(?<![\w/.-])(?:bench|docs|patches|results|tests|src/meminit)/")


def message(patch: Path) -> list[str]:
    """The message of a format-patch file: its Subject (folded lines included) to the '---'."""
    lines = patch.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Subject:"))
    return lines[start:lines.index("---", start)]


def mailed_patches() -> list[Path]:
    return [patch for linux in (kernels.LTS, kernels.MAINLINE)
            for part in parts.read_parts(linux.patches) if part.kind != parts.TEST_ONLY
            for patch in parts.read_series(linux.patches / part.name)]


@pytest.mark.parametrize("patch", mailed_patches(), ids=lambda p: str(p.relative_to(paths.PATCHES))[:60])
def test_a_mailed_message_is_a_changelog(patch: Path):
    text = message(patch)
    assert len(text) <= MAX_LINES, f"{patch.name}: {len(text)} lines; the long story belongs in docs/"
    outside = [line for line in text if OUTSIDE_PATHS.search(line)]
    assert not outside, f"{patch.name} names paths outside the kernel tree: {outside}"


def test_the_check_sees_a_long_message_and_a_harness_path(tmp_path: Path):
    long = tmp_path / "0001-long.patch"
    long.write_text("From x\nSubject: [PATCH] x\n\n" + "line\n" * MAX_LINES + "---\n diff\n")
    assert len(message(long)) == MAX_LINES + 2   # Subject, blank line, body
    assert OUTSIDE_PATHS.search("see bench/RESULTS.md") and OUTSIDE_PATHS.search("(docs/x.md)")
    assert not OUTSIDE_PATHS.search("mm/tests/x.c, lib/tests/, tools/testing/selftests/mm/")
