"""The kernel tree's commands: `tree`, `export`, `build`, `check-series`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from meminit import build, checks, mail, paths, source
from meminit.commands import cover_letter
from meminit.errors import MeminitError

MAIL_DIR = paths.WORK / "mail"


def _cmd_tree(args: argparse.Namespace) -> int:
    trees = source.prepare_trees(reset=args.reset)
    print(f"series tree: {trees.series} ({len(source.read_series())} patches on {source.BASE_TAG})")
    print(f"base tree:   {trees.base}")
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    if args.mbox is not None and not paths.KERNEL_TREE.exists():
        source.prepare_trees()   # a fresh checkout: the tree is patches/ applied
    written = source.export_series()
    for patch in written:
        print(f"patches/{patch.name}")
    print(f"{len(written)} patches exported; patches/series updated")
    if args.mbox is not None:
        export_mail(Path(args.mbox), args.sender or mail.sender_from_git(), args.subject_prefix)
    return 0


def export_mail(out_dir: Path, sender: str, subject_prefix: str = "RFC PATCH") -> mail.Mail:
    """The series as mail in out_dir from `sender`, checked as it will be sent: checkpatch
    --strict on every patch, and git am of the mbox onto the base giving the series."""
    tree = paths.KERNEL_TREE
    mail.check_sender(sender)
    stale = source.unreproducible_base(tree)
    if stale:
        raise MeminitError(f"{stale}: its hash is no base-commit anyone can recreate. Export your "
                           f"work, then `rm -rf {tree} && meminit tree`")
    blurb = cover_letter.blurb(source.SOURCE_PACKAGE, source.source_version())
    written = mail.write(tree, out_dir, cover_letter.SUBJECT, blurb, sender, subject_prefix)
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
    p = sub.add_parser("tree", help="unpack linux-source-6.12 and apply patches/ as git commits")
    p.add_argument("--reset", action="store_true",
                   help="discard commits or changes in work/linux that were not exported")
    p.set_defaults(func=_cmd_tree)
    p = sub.add_parser("export", help="write the commits of work/linux back to patches/")
    p.add_argument("--mbox", nargs="?", const=str(MAIL_DIR), default=None, metavar="DIR",
                   help="also write the series as mail: cover letter, recipients, changelog, one mbox "
                        f"(default DIR: {MAIL_DIR.relative_to(paths.REPO)}); checked with checkpatch and git am")
    p.add_argument("--from", dest="sender", metavar="'NAME <ADDRESS>'",
                   help="--mbox: who sends the mail and signs off the patches (default: git config "
                        "user.name and user.email)")
    p.add_argument("--subject-prefix", default="RFC PATCH",
                   help="--mbox: the subjects' prefix (default 'RFC PATCH': the series is on 6.12, not mm)")
    p.set_defaults(func=_cmd_export)


def _cmd_build(args: argparse.Namespace) -> int:
    build.build_variants(args.variants or ["series"], reset=args.reset, jobs=args.jobs)
    return 0


def _register_build(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("build", help="build the base and/or series kernel (ccache, trimmed config)")
    p.add_argument("variants", nargs="*", metavar="VARIANT",
                   help="base, series and/or debug (default: series)")
    p.add_argument("-j", "--jobs", type=int, help="parallel jobs (default: number of CPUs)")
    p.add_argument("--reset", action="store_true", help="discard unexported work in work/linux")
    p.set_defaults(func=_cmd_build)


def _cmd_check_series(args: argparse.Namespace) -> int:
    checks.check_series(args.jobs, touched_only=args.touched_only)
    return 0


def _register_checks(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check-series", help="build every prefix of the series, checkpatch, W=1")
    p.add_argument("-j", "--jobs", type=int, help="parallel jobs (default: 2)")
    p.add_argument("--touched-only", action="store_true",
                   help="per prefix compile only the files the series touched so far (W=1) and "
                        "build only the last prefix fully: what CI runs; the default builds "
                        "every prefix fully, for before a submission")
    p.set_defaults(func=_cmd_check_series)


def register(sub: argparse._SubParsersAction) -> None:
    _register_source(sub)
    _register_build(sub)
    _register_checks(sub)
