"""The documentation names only commands and options that exist (issue 16: README and code
in step), and reaches every command (issue 35): every `./meminit ...` line in the README,
docs/ and bench/ parses, every --option they name is ours or one of the named tools', every
subcommand has its page in docs/, and every relative link leads to a file (and heading)
that exists."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from meminit import cli

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOC_DIR = REPO / "docs"
BENCH_DOCS = sorted(p for p in (REPO / "bench").rglob("*.md") if "build" not in p.relative_to(REPO / "bench").parts)
DOCS = [README, *sorted(DOC_DIR.glob("*.md")), *BENCH_DOCS]
# dated records: their prose may name options of an earlier tool (their command lines still parse)
RECORDS = {DOC_DIR / "series.md", REPO / "bench" / "RESULTS.md"}
# options of other tools the docs quote: ndctl's, checkpatch's, git's (commit, send-email)
FOREIGN_OPTIONS = {"--map", "--align", "--strict", "--amend", "--from", "--mode", "--shared"}
PLACEHOLDERS = {"STAMP": "20261124T000000Z", "RUN_DIR": "results/microbench-x", "<time>": "x",
                "TARGET ...": "um", "PROGRAM ...": "cow", "BASE": "x", "SERIES": "y", "…": "",
                "add|table|replay": "table", "[": "", "]": ""}
# the page of each subcommand is docs/<subcommand>.md, but for these families
PAGE_OF = {"tree": "tree-build-export.md", "build": "tree-build-export.md", "export": "tree-build-export.md"}


def documented_commands() -> list[tuple[str, str]]:
    found = []
    for doc in DOCS:
        for line in re.findall(r"\./meminit [^`#\n]*", doc.read_text()):
            found.append((str(doc.relative_to(REPO)), line.strip()))
    return found


def normalised(line: str) -> list[str]:
    for placeholder, value in PLACEHOLDERS.items():
        line = line.replace(placeholder, value)
    return shlex.split(line)[1:]


def parses(argv: list[str]) -> bool:
    try:
        cli.parse(cli.make_parser(), argv)
    except SystemExit:
        return False
    return True


def test_the_docs_quote_commands():
    assert len(documented_commands()) > 20
    assert {doc for doc, _ in documented_commands()} >= {"README.md", "docs/run.md", "bench/README.md"}


@pytest.mark.parametrize("doc,line", [c for c in documented_commands() if "COMMAND" not in c[1]])
def test_every_documented_command_parses(doc, line):
    assert parses(normalised(line)), f"{doc}: `{line}` is not a meminit command line"


def subcommands() -> dict[str, object]:
    (action,) = cli.make_parser()._subparsers._group_actions
    return dict(action.choices)


def parser_options() -> set[str]:
    """Every --option of every subcommand, and the prefixes of those a command takes by prefix."""
    options = set()
    for sub in subcommands().values():
        options |= {o for a in sub._actions for o in a.option_strings if o.startswith("--")}
        prefix = sub.get_default("dynamic_option_prefix")
        options |= {prefix} if prefix else set()
    return options


def bench_options() -> set[str]:
    """The long options of the benchmark binary, meminit-bench (bench/src/options.c)."""
    source = (REPO / "bench" / "src" / "options.c").read_text()
    return {"--" + name for name in re.findall(r'\{\s*"([a-z][a-z0-9-]*)",\s*[012],', source)}


def unknown_options(doc: Path) -> list[str]:
    named = set(re.findall(r"(?:^|[\s`(])(--[a-z][a-z0-9-]*)", doc.read_text()))
    known = parser_options() | FOREIGN_OPTIONS | (bench_options() if doc in BENCH_DOCS else set())
    return sorted(named - known)


@pytest.mark.parametrize("doc", [d for d in DOCS if d not in RECORDS], ids=lambda d: str(d.relative_to(REPO)))
def test_every_option_the_docs_name_exists(doc):
    assert unknown_options(doc) == []


def page_of(subcommand: str) -> Path:
    return DOC_DIR / PAGE_OF.get(subcommand, f"{subcommand}.md")


def documents(page: Path, subcommand: str) -> bool:
    """The page has a heading that names `./meminit SUBCOMMAND`."""
    return page.exists() and any(re.search(rf"\./meminit {re.escape(subcommand)}(?![\w-])", line)
                                 for line in page.read_text().splitlines() if line.startswith("#"))


@pytest.mark.parametrize("subcommand", sorted(subcommands()))
def test_every_subcommand_has_its_page(subcommand):
    page = page_of(subcommand)
    assert documents(page, subcommand), \
        f"`./meminit {subcommand}` has no page: {page.relative_to(REPO)} with a heading naming it"


def test_the_readme_leads_to_every_page():
    linked = {(README.parent / target).resolve() for target, _ in links(README)}
    pages = {p.resolve() for p in DOC_DIR.glob("*.md")} | {p.resolve() for p in BENCH_DOCS}
    assert sorted(str(p.relative_to(REPO)) for p in pages - linked) == []


def links(doc: Path) -> list[tuple[str, str]]:
    """(path, anchor) of every relative Markdown link outside code; a link within the page has
    the page's own path."""
    text = re.sub(r"```.*?```", "", doc.read_text(), flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    found = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        found.append((path or doc.name, anchor))
    return found


def anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens, -1, -2 ...
    for repeats."""
    seen: dict[str, int] = {}
    out = set()
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    for heading in re.findall(r"^#+ (.*)$", text, re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        out.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return out


def broken_links(doc: Path) -> list[str]:
    broken = []
    for path, anchor in links(doc):
        target = (doc.parent / path).resolve()
        if not target.exists():
            broken.append(f"{path}: no such file")
        elif anchor and target.suffix == ".md" and anchor not in anchors(target):
            broken.append(f"{path}#{anchor}: no such heading")
    return broken


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: str(d.relative_to(REPO)))
def test_every_relative_link_leads_somewhere(doc):
    assert broken_links(doc) == []


def test_the_checks_can_fail(tmp_path):
    assert not parses(normalised("./meminit soak --cyles 2"))
    assert not parses(normalised("./meminit nosuchcommand"))
    assert "--cyles" not in parser_options()
    assert "--auto-lead" in bench_options() and "--auto-lead" not in parser_options()
    page = tmp_path / "page.md"
    page.write_text("# Soak: `./meminit soak-all`\n\n## Heading, with `code`\n\n"
                    "[a](page.md#heading-with-code) [b](nowhere.md) [c](page.md#nowhere) [d](https://x)\n")
    assert not documents(page, "soak") and not documents(tmp_path / "none.md", "soak")
    assert broken_links(page) == ["nowhere.md: no such file", "page.md#nowhere: no such heading"]
