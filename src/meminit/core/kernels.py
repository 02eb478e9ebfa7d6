"""The kernels the series lives on: Debian's 6.12 LTS and Debian's newest, 7.3.

Each has its own series (patches/VERSION/), its own git tree and builds under work/, and its
own source package. 6.12's comes from the machine's own apt sources (bookworm's security
suite carries linux-source-6.12); 7.3's from trixie-backports, fetched with `apt-get download`
through a private apt list under work/apt/ (deps.fetch_deb), so the machine's own sources
and installed packages never change. 6.12 keeps the paths it had before 7.3 came, so trees
and builds made then stay valid.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from meminit.core import paths


# the long guests of `meminit test --long` that are ported kernel by kernel: the soak, the
# fast subset of the mm selftests, and measure run against the guest's pmem
LONG_GUESTS = ("soak", "selftests", "measure")
# the dynamic preemption models preempt_model_preemptible() is true for
PREEMPTIBLE_MODELS = ("full", "lazy")


@dataclass(frozen=True)
class Linux:
    version: str          # "6.12": the upstream release the Debian package follows
    # The base commit's fixed date, so that one source package gives one base commit
    # everywhere (a mailed series' base-commit can then be recreated with `meminit tree`).
    base_date: str
    # The Debian suite to fetch the source package from privately; "" means the machine's
    # own apt sources install it.
    suite: str = ""
    # trees and builds under work/ carry this suffix ("" for the LTS, which had them first)
    work_suffix: str = ""
    # the preemption model `test --long` boots the debug kernel (full preemption) with a
    # second time: the one furthest from full the kernel has on x86
    other_preempt: str = "none"
    # the mailed series' subject prefix: the series for mm is a [PATCH]; a backport to an
    # older kernel can only be a request for comments
    mail_prefix: str = "PATCH"
    # the long guests of `meminit test --long` ported to this kernel (of LONG_GUESTS; the
    # package guests follow `package`, which serves the LTS): the others skip, saying so
    long_guests: tuple[str, ...] = ()
    # whether .ci/run runs check-configs' kunit group (arm64) for this kernel: a cold CI is
    # CPU-bound on 2 CPUs and has room for one such kernel build (docs/test.md)
    ci_kunit: bool = True
    # the opt-in RFC parts of its series applied besides the default stack ('threads', ...:
    # the commands' --rfc, kernel/parts.py); not part of which kernel it is
    rfcs: tuple[str, ...] = field(default=(), compare=False)

    def with_rfcs(self, rfcs: tuple[str, ...]) -> Linux:
        return replace(self, rfcs=tuple(rfcs))

    @property
    def source_package(self) -> str:
        return f"linux-source-{self.version}"

    @property
    def patches(self) -> Path:
        return paths.PATCHES / self.version

    @property
    def tree(self) -> Path:
        return paths.WORK / f"linux{self.work_suffix}"

    @property
    def base_tree(self) -> Path:
        return paths.WORK / f"linux{self.work_suffix}-base"

    @property
    def build_root(self) -> Path:
        return paths.WORK / f"build{self.work_suffix}"

    @property
    def fetched(self) -> Path:
        """Where a privately fetched source package is unpacked (dpkg-deb -x)."""
        return paths.WORK / "sources" / self.version

    @property
    def tarball(self) -> Path:
        root = self.fetched if self.suite else Path("/")
        return root / "usr" / "src" / f"{self.source_package}.tar.xz"

    def own_config(self, *parts: str) -> Path:
        """config/VERSION/...: what this kernel alone has, beside what config/ shares."""
        return paths.CONFIG_DIR.joinpath(self.version, *parts)

    @property
    def other_preempt_preemptible(self) -> bool:
        """Whether that model is preemptible, as full is (7.3's lazy; the kernel's
        preempt_model_preemptible()): folio_zero_user() then clears as under full, and the
        second boot leaves out its slow 1 GiB case."""
        return self.other_preempt in PREEMPTIBLE_MODELS

    def config(self, *parts: str) -> Path:
        """config/VERSION/... where this kernel has its own file, else config/...: the shared one."""
        own = self.own_config(*parts)
        return own if own.exists() else paths.CONFIG_DIR.joinpath(*parts)


LTS = Linux("6.12", base_date="2024-11-17T00:00:00Z", mail_prefix="RFC PATCH", long_guests=LONG_GUESTS)
# Debian's first 7.3 upload (7.3.1-1~exp1) is of 2026-11-01
MAINLINE = Linux("7.3", base_date="2026-11-01T00:00:00Z", suite="trixie-backports", work_suffix="-7.3",
                 other_preempt="lazy", long_guests=("soak", "selftests"), ci_kunit=False)
KERNELS = {k.version: k for k in (LTS, MAINLINE)}
DEFAULT = LTS


# `meminit test --linux` tells the pytest run it starts which kernel its kernel tests are for,
# and `--rfc` which RFC parts that kernel carries (comma-separated)
ENV = "MEMINIT_LINUX"
RFC_ENV = "MEMINIT_RFC"


def get(version: str) -> Linux:
    return KERNELS[version]


def from_env() -> Linux:
    """The kernel named by $MEMINIT_LINUX (the test command's --linux), else the default, with
    the RFC parts $MEMINIT_RFC names."""
    rfcs = tuple(n for n in os.environ.get(RFC_ENV, "").split(",") if n)
    return KERNELS[os.environ.get(ENV, DEFAULT.version)].with_rfcs(rfcs)
