"""Host packages: each command asks for what it needs; missing ones are installed with apt."""

from __future__ import annotations

import fcntl
import os
import pwd
import shutil
import sys
from pathlib import Path

from meminit.core import paths, proc
from meminit.core.errors import MeminitError

# Debian package -> a file it installs, to test for presence without dpkg races.
# The kernel's source package is not here: source.source_version() asks for the one it unpacks.
KERNEL_BUILD = {
    "build-essential": "/usr/bin/make",
    "flex": "/usr/bin/flex",
    "bison": "/usr/bin/bison",
    "bc": "/usr/bin/bc",
    "libelf-dev": "/usr/include/libelf.h",
    "libssl-dev": "/usr/include/openssl/ssl.h",
    "ccache": "/usr/bin/ccache",
    "xz-utils": "/usr/bin/xz",
    "cpio": "/usr/bin/cpio",
    "kmod": "/usr/bin/kmod",
    "rsync": "/usr/bin/rsync",
    "git": "/usr/bin/git",
}
GUEST = {
    "qemu-system-x86": "/usr/bin/qemu-system-x86_64",
    "ndctl": "/usr/bin/ndctl",
    "daxctl": "/usr/bin/daxctl",
    "busybox-static": "/bin/busybox",
    "udev": "/usr/bin/udevadm",
    # cyclictest, for the fault-latency scenario
    "rt-tests": "/usr/bin/cyclictest",
}
# `measure`, on the machine with the device
HOST = {
    "ndctl": "/usr/bin/ndctl",
    "daxctl": "/usr/bin/daxctl",
    "util-linux": "/usr/sbin/blkid",
    "kmod": "/usr/bin/kmod",
}
BENCH = {
    "build-essential": "/usr/bin/gcc",
}


def missing(packages: dict[str, str]) -> list[str]:
    return [name for name, probe in packages.items() if not os.path.exists(probe)]


_updated = False
# Another apt (unattended-upgrades on a real machine, a second meminit) holds dpkg's lock
# for a while: wait for it rather than fail.
LOCK_WAIT = ["-o", "DPkg::Lock::Timeout=600"]


# Two meminit commands of one checkout that install at once (CI runs one beside another)
# take turns: apt-get update does not wait for another's lock on apt's lists, it fails.
INSTALL_LOCK = "apt-install.lock"


def ensure(packages: dict[str, str]) -> None:
    """Install the packages whose probe file is missing; fail naming the package."""
    todo = missing(packages)
    if not todo:
        return
    if shutil.which("apt-get") is None:
        raise MeminitError(f"missing packages {' '.join(todo)} and no apt-get to install them")
    paths.WORK.mkdir(parents=True, exist_ok=True)
    with open(paths.WORK / INSTALL_LOCK, "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print("meminit: waiting for another meminit command of this checkout to finish "
                  "installing packages", file=sys.stderr, flush=True)
            fcntl.flock(lock, fcntl.LOCK_EX)
        _install(packages)   # the lock goes with the file


def _install(packages: dict[str, str]) -> None:
    global _updated
    todo = missing(packages)   # again: what another command installed meanwhile is there
    if not todo:
        return
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    if not _updated:
        print("meminit: apt-get update", file=sys.stderr, flush=True)
        update = proc.run(["apt-get", "update", "-q", *LOCK_WAIT], env=env, check=False)
        complaints = _apt_lines(update.stdout, update.stderr, ("E:", "W:", "Err:"))
        if update.returncode != 0 or complaints:   # the install below may still work: say it
            print(f"meminit: apt-get update (exit {update.returncode}):\n"
                  + proc.tail("\n".join(complaints) or update.stderr), file=sys.stderr, flush=True)
        _updated = True
    for name in todo:
        print(f"meminit: apt-get install {name}", file=sys.stderr, flush=True)
        proc.run(["apt-get", "install", "-y", "-q", "--no-install-recommends", *LOCK_WAIT, name],
                 f"apt-get install {name}", env=env)


def _apt_lines(stdout: str, stderr: str, prefixes: tuple[str, ...]) -> list[str]:
    """apt's output lines that start with one of prefixes (its errors, warnings)."""
    return [line for line in stdout.splitlines() + stderr.splitlines() if line.startswith(prefixes)]


def package_version(name: str) -> str:
    query = proc.run(["dpkg-query", "-W", "-f=${Version}", name], check=False)
    if query.returncode != 0 or not query.stdout:
        raise MeminitError(f"package {name} is not installed")
    return query.stdout


DEBIAN_MIRROR = os.environ.get("MEMINIT_DEBIAN_MIRROR", "http://deb.debian.org/debian")
ARCHIVE_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"


def fetch_deb(package: str, suite: str, apt_dir: Path, dest: Path) -> Path:
    """`apt-get download` of package from Debian's suite into dest, through a private apt list
    in apt_dir: the machine's own sources, lists and installed packages stay as they are, and
    apt checks the suite's signature and the package's hash as for any install."""
    ensure({"debian-archive-keyring": ARCHIVE_KEYRING})
    for sub in ("lists/partial", "cache/archives/partial"):
        (apt_dir / sub).mkdir(parents=True, exist_ok=True)
    sources = apt_dir / "sources.list"
    sources.write_text(f"deb [signed-by={ARCHIVE_KEYRING}] {DEBIAN_MIRROR} {suite} main\n")
    options = [f"-oDir::Etc::SourceList={sources}", "-oDir::Etc::SourceParts=/nonexistent",
               f"-oDir::State::Lists={apt_dir / 'lists'}", f"-oDir::Cache={apt_dir / 'cache'}",
               "-oDir::State::status=/dev/null", "-oAPT::Architecture=amd64"]
    print(f"meminit: apt-get update of {suite} (private list: {sources})", file=sys.stderr, flush=True)
    update = proc.run(["apt-get", *options, "update", "-q"], f"apt-get update of {suite}", check=False)
    failed = _apt_lines(update.stdout, update.stderr, ("E:", "Err:"))
    if update.returncode != 0 or failed:
        raise MeminitError(f"apt-get update of Debian's {suite} from {DEBIAN_MIRROR} failed "
                           f"(exit {update.returncode}):\n" + proc.tail("\n".join(failed) or update.stderr))
    dest.mkdir(parents=True, exist_ok=True)
    for old in dest.glob(f"{package}_*.deb"):
        old.unlink()
    _let_apt_write(dest)
    print(f"meminit: apt-get download {package} ({suite})", file=sys.stderr, flush=True)
    proc.run(["apt-get", *options, "download", "-q", package], f"apt-get download {package} from {suite}",
             cwd=dest)
    debs = sorted(dest.glob(f"{package}_*.deb"))
    if len(debs) != 1:
        raise MeminitError(f"apt-get download {package} left {len(debs)} packages in {dest}")
    return debs[0]


def _let_apt_write(directory: Path) -> None:
    """apt downloads as its unprivileged user _apt, where it can write: give it the directory."""
    try:
        apt_user = pwd.getpwnam("_apt")
    except KeyError:
        return
    if os.geteuid() == 0:
        os.chown(directory, apt_user.pw_uid, -1)


def deb_field(deb: Path, field: str) -> str:
    return proc.run(["dpkg-deb", "-f", str(deb), field], f"dpkg-deb -f {deb.name}").stdout.strip()
