"""The harness's annotated code type-checks (mypy, configured in pyproject.toml): a request
field of the wrong type or a value that may be None where a number is needed fails here,
before a guest boots."""

from __future__ import annotations

from pathlib import Path

from mypy import api

REPO = Path(__file__).resolve().parents[1]


def test_the_harness_type_checks():
    stdout, stderr, status = api.run(["--config-file", str(REPO / "pyproject.toml"),
                                      "--cache-dir", str(REPO / "work" / "mypy-cache"),
                                      str(REPO / "src" / "meminit")])
    assert status == 0, f"mypy found type errors:\n{stdout}{stderr}"
