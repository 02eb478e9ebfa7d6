"""The kernel tree's commands: `tree`, `export`, `build`, `check-series`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from meminit.core import kernels, paths
from meminit.kernel import build, checks, mail, own_tree, parts, series_size, source
from meminit.commands import options
from meminit.commands import cover_letter
from meminit.core.errors import MeminitError
from meminit.core.kernels import Linux

MAIL_DIR = paths.WORK / "mail"


def _cmd_tree(args: argparse.Namespace) -> int:
    linux = options.linux_from(args)
    trees = source.prepare_trees(linux, reset=args.reset)
    stack = parts.read_stack(linux.patches, linux.rfcs)
    print(f"series tree: {trees.series} ({sum(len(ps) for _, ps in stack)} patches on {source.BASE_TAG}, "
          f"{linux.source_package} {source.source_version(linux)}: "
          f"{', '.join(f'{p.name} {len(ps)}' for p, ps in stack)})")
    print(f"base tree:   {trees.base}")
    return 0


def mailed_part(linux: Linux, rfc: tuple[str, ...], topic: str | None) -> parts.Part:
    """The part `export --mbox` mails: the core, one RFC (--rfc NAME) or a topic (--topic NAME);
    never test-only."""
    known = parts.read_parts(linux.patches)
    if rfc and topic or len(rfc) > 1:
        raise MeminitError("export --mbox mails one part: the core (default), --rfc NAME or --topic NAME")
    if rfc:
        found = [p for p in known if p.kind == "rfc" and p.short == rfc[0]]
        if not found:
            raise MeminitError(f"no RFC part {rfc[0]!r} to mail: this kernel's are "
                               f"{', '.join(p.short for p in known if p.kind == 'rfc') or 'none'}")
        return found[0]
    if topic:
        found = [p for p in known if p.name == topic]
        if not found or found[0].kind != "topic":
            raise MeminitError(f"no topic {topic!r} to mail: this kernel's are "
                               f"{', '.join(p.name for p in known if p.kind == 'topic') or 'none'} "
                               "(test-only is never mailed)")
        return found[0]
    return known[0]


def stack_for(part: parts.Part) -> tuple[str, ...]:
    """The RFCs a tree must carry, and only those, to mail `part` as it applies: an RFC's
    needs and itself; none for the core and a topic."""
    return tuple(n.removeprefix(parts.RFC_PREFIX) for n in part.needs + (part.name,)) if part.kind == "rfc" else ()


def _cmd_export(args: argparse.Namespace) -> int:
    linux = options.linux_from(args)
    part = mailed_part(linux, linux.rfcs, args.topic) if args.mbox is not None else None
    if part is not None and not linux.tree.exists():
        # a fresh checkout: the tree is its patches applied, with the RFC to mail
        source.prepare_trees(linux.with_rfcs(stack_for(part)))
    written = source.export_series(linux.tree, linux.patches)
    where = linux.patches.relative_to(paths.REPO)
    for patch in written:
        print(f"{where}/{patch.parent.relative_to(linux.patches)}/{patch.name}")
    print(f"{len(written)} patches exported to the folders of their parts under {where}/")
    if part is not None:
        export_mail(Path(args.mbox), args.sender or mail.sender_from_git(), args.subject_prefix, linux, part)
    return 0


def export_mail(out_dir: Path, sender: str, subject_prefix: str | None = None,
                linux: Linux = kernels.DEFAULT, part: parts.Part | None = None) -> mail.Mail:
    """One part of the series (the core by default) as mail in out_dir from `sender`, checked
    as it will be sent: checkpatch --strict on every patch, and git am of the mbox onto what
    it applies on giving that part."""
    tree = linux.tree
    part = part or parts.read_parts(linux.patches)[0]
    carried = source.tree_parts(tree)
    # what the part applies on in the tree must be what it is mailed on: the core and its needs
    before = carried[:carried.index(part.name)] if part.name in carried else None
    if before is None or set(before) - {parts.CORE, *part.needs}:
        rfcs = stack_for(part)
        raise MeminitError(f"to mail {part.name}, {tree} must carry {' + '.join([parts.CORE, *part.needs, part.name])} "
                           f"and no other RFC before it (it carries {' + '.join(carried)}): `meminit tree "
                           f"--linux {linux.version}{' --rfc ' + ','.join(rfcs) if rfcs else ''}` first")
    commits = source.part_range(tree, part.name)
    mail.check_sender(sender)
    stale = source.unreproducible_base(tree, linux)
    if stale:
        raise MeminitError(f"{stale}: its hash is no base-commit anyone can recreate. Export your "
                           f"work, then `rm -rf {tree} && meminit tree --linux {linux.version}`")
    if part.kind == parts.CORE:
        subject, blurb = cover_letter.core_cover(linux, own_tree.makefile_release(tree, source.BASE_TAG))
    else:
        subject, blurb = cover_letter.part_cover(linux.patches / part.name)
    prefix = subject_prefix or ("RFC PATCH" if part.kind == "rfc" else linux.mail_prefix)
    written = mail.write(tree, out_dir, subject, blurb, sender, prefix, linux.patches / "changelog", commits)
    onto = source.BASE_TAG if part.kind == parts.CORE else f"the {' + '.join([parts.CORE, *part.needs])} commits"
    print(f"meminit: checking the mail as sent: checkpatch --strict, git am onto {onto}", file=sys.stderr, flush=True)
    failures = checks.checkpatch(tree, written.patches)   # the files as sent: headers, changelog
    if failures:
        raise MeminitError("the mailed patches are not checkpatch --strict clean:\n" + "\n".join(failures))
    applied = mail.apply_check(tree, written, paths.WORK / "mail-am-check")
    differs = mail.same_series(tree, applied, sender, commits)
    if differs:
        raise MeminitError(f"git am of {written.mbox} onto {onto}: {differs}")
    print(f"mail: {written.cover}")
    print(f"      and {len(written.patches)} patches beside it, all of it in {written.mbox}")
    print(f"from and signed off by {sender}; checkpatch --strict clean; git am gives {part.name}")
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
    p.add_argument("--topic", metavar="NAME",
                   help="--mbox: mail this topic part (patches/VERSION/NAME/) instead of the core; "
                        "--rfc NAME mails that RFC part (test-only is never mailed)")
    p.add_argument("--subject-prefix", default=None,
                   help="--mbox: the subjects' prefix (default: 'PATCH' for 7.3's core and topics, the "
                        "series for mm; 'RFC PATCH' for 6.12, its backport, and for every RFC part)")
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
    if args.size:
        linux = options.linux_from(args)
        for part, patches in parts.read_stack(linux.patches, linux.rfcs):
            print(series_size.report(part.name, series_size.part_size(patches),
                                     series_size.CORE_LIMIT if part.name == parts.CORE else None))
        return 0
    if args.checkpatch_only:
        checks.checkpatch_parts(options.linux_from(args))
        return 0
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
    p.add_argument("--size", action="store_true",
                   help="only count the lines of kernel code each patch of each part adds (no blank "
                        "lines, comments, tests): the core's budget (kernel/series_size.py)")
    p.add_argument("--checkpatch-only", action="store_true",
                   help="only check that the stack applies (in a scratch worktree) and checkpatch "
                        "--strict every patch of it (with --rfc: the RFC parts' too), without changing "
                        "the tree or building: what CI runs for the RFCs")
    p.set_defaults(func=_cmd_check_series)


def register(sub: argparse._SubParsersAction) -> None:
    _register_source(sub)
    _register_build(sub)
    _register_checks(sub)
