"""The kernel tree's commands: `tree`, `export`, `build`, `check-series`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from meminit.core import kernels, paths
from meminit.kernel import build, checks, mail, source
from meminit.commands import options
from meminit.commands import cover_letter
from meminit.core.errors import MeminitError
from meminit.core.kernels import Linux

MAIL_DIR = paths.WORK / "mail"


def _cmd_tree(args: argparse.Namespace) -> int:
    linux = options.linux_from(args)
    trees = source.prepare_trees(linux, reset=args.reset)
    print(f"series tree: {trees.series} ({len(source.read_series(linux.patches))} patches on "
          f"{source.BASE_TAG}, {linux.source_package} {source.source_version(linux)})")
    print(f"base tree:   {trees.base}")
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    linux = options.linux_from(args)
    if args.mbox is not None and not linux.tree.exists():
        source.prepare_trees(linux)   # a fresh checkout: the tree is its patches applied
    written = source.export_series(linux.tree, linux.patches)
    where = linux.patches.relative_to(paths.REPO)
    for patch in written:
        print(f"{where}/{patch.name}")
    print(f"{len(written)} patches exported; {where}/series updated")
    if args.mbox is not None:
        export_mail(Path(args.mbox), args.sender or mail.sender_from_git(), args.subject_prefix, linux)
    return 0


def export_mail(out_dir: Path, sender: str, subject_prefix: str | None = None,
                linux: Linux = kernels.DEFAULT) -> mail.Mail:
    """The series as mail in out_dir from `sender`, checked as it will be sent: checkpatch
    --strict on every patch, and git am of the mbox onto the base giving the series."""
    tree = linux.tree
    mail.check_sender(sender)
    stale = source.unreproducible_base(tree, linux)
    if stale:
        raise MeminitError(f"{stale}: its hash is no base-commit anyone can recreate. Export your "
                           f"work, then `rm -rf {tree} && meminit tree --linux {linux.version}`")
    blurb = cover_letter.blurb(linux, source.source_version(linux))
    written = mail.write(tree, out_dir, cover_letter.SUBJECTS[linux.version], blurb, sender,
                         subject_prefix or linux.mail_prefix, linux.patches / "changelog")
    print(f"meminit: checking the mail as sent: checkpatch --strict, git am onto {source.BASE_TAG}",
          file=sys.stderr, flush=True)
    failures = checks.checkpatch(tree, written.patches)   # the files as sent: headers, changelog
    if failures:
        raise MeminitError("the mailed patches are not checkpatch --strict clean:\n" + "\n".join(failures))
    applied = mail.apply_check(tree, written, paths.WORK / "mail-am-check")
    differs = mail.same_series(tree, applied, sender)
    if differs:
        raise MeminitError(f"git am of {written.mbox} onto {source.BASE_TAG}: {differs}")
    print(f"mail: {written.cover}")
    print(f"      and {len(written.patches)} patches beside it, all of it in {written.mbox}")
    print(f"from and signed off by {sender}; checkpatch --strict clean; git am gives the series")
    print(f"send with:  git send-email {written.cover.parent}/*.patch")
    return written


def _register_source(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tree", help="unpack the kernel's Debian linux-source and apply its patches as git commits")
    options.add_linux_option(p)
    p.add_argument("--reset", action="store_true",
                   help="discard commits or changes in the kernel's tree that were not exported")
    p.set_defaults(func=_cmd_tree)
    p = sub.add_parser("export", help="write the commits of the kernel's tree back to patches/VERSION/")
    options.add_linux_option(p)
    p.add_argument("--mbox", nargs="?", const=str(MAIL_DIR), default=None, metavar="DIR",
                   help="also write the series as mail: cover letter, recipients, changelog, one mbox "
                        f"(default DIR: {MAIL_DIR.relative_to(paths.REPO)}); checked with checkpatch and git am")
    p.add_argument("--from", dest="sender", metavar="'NAME <ADDRESS>'",
                   help="--mbox: who sends the mail and signs off the patches (default: git config "
                        "user.name and user.email)")
    p.add_argument("--subject-prefix", default=None,
                   help="--mbox: the subjects' prefix (default: 'PATCH' for 7.3, the series for mm; "
                        "'RFC PATCH' for 6.12, its backport)")
    p.set_defaults(func=_cmd_export)


def _cmd_build(args: argparse.Namespace) -> int:
    build.build_variants(args.variants or ["series"], reset=args.reset, jobs=args.jobs,
                         linux=options.linux_from(args))
    return 0


def _register_build(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("build", help="build the base and/or series kernel (ccache, trimmed config)")
    p.add_argument("variants", nargs="*", metavar="VARIANT",
                   help="base, series and/or debug (default: series)")
    options.add_linux_option(p)
    p.add_argument("-j", "--jobs", type=options.integer(), help="parallel jobs (default: number of CPUs)")
    p.add_argument("--reset", action="store_true", help="discard unexported work in the kernel's tree")
    p.set_defaults(func=_cmd_build)


def _cmd_check_series(args: argparse.Namespace) -> int:
    checks.check_series(args.jobs, touched_only=args.touched_only, linux=options.linux_from(args))
    return 0


def _register_checks(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check-series", help="build every prefix of the series, checkpatch, W=1")
    options.add_linux_option(p)
    p.add_argument("-j", "--jobs", type=options.integer(), help="parallel jobs (default: 2)")
    p.add_argument("--touched-only", action="store_true",
                   help="per prefix compile only the files the series touched so far (W=1) and "
                        "build only the last prefix fully: what CI runs; the default builds "
                        "every prefix fully, for before a submission")
    p.set_defaults(func=_cmd_check_series)


def register(sub: argparse._SubParsersAction) -> None:
    _register_source(sub)
    _register_build(sub)
    _register_checks(sub)
