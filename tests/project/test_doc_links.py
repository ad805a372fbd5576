"""Every relative link and #anchor in the user's pages resolves, and every file of the repository
they name exists: a page moved or renamed, or a heading reworded, fails here instead of leaving
a reader on GitHub's 404 or at the top of a page. The same holds for every tracked text file:
a comment, docstring or page that names a file (`docs/metrics.md §4`, `bench/ab.py`,
`store/prices/overrides.entries`, `CONTRIBUTING.md`) names one that is in the repository.

Anchors are computed as GitHub computes them from headings (lowercased, punctuation dropped,
spaces made hyphens, a repeated heading numbered -1, -2, …)."""

from __future__ import annotations

import re
import subprocess
from functools import cache
from pathlib import Path

import pytest

from tests.support.paths import REPO

PAGES = [REPO / "README.md", REPO / "CONTRIBUTING.md", REPO / "bench" / "README.md",
         REPO / "sdk" / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.S | re.M)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\((?P<target>[^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^(#{1,6})\s+(?P<text>.+?)\s*#*\s*$", re.M)
# A file of the repository named in prose or in code: a top-level folder, then a path (a file,
# a folder, a glob, or a module and one of its names: `budgetscope/server/read_api.ServedCommands`).
TOP = ("budgetscope", "ingest", "store", "queries", "dashboard", "simulation", "sdk",
       "sample_traces", "tests", "bench", "docs", ".ci")
NAMED = re.compile(rf"(?<![\w./-])(?P<path>(?:{'|'.join(map(re.escape, TOP))})/[\w.*/-]*[\w*])"
                   r"(?P<pattern>[<{]?)")
# A Markdown file named in capitals (README.md, ../../bench/README.md): in the repository, from its
# top or from the file's folder (a path leading out of the repository does not count).
UPPER_MD = re.compile(r"(?<![\w.-])(?P<path>(?:[\w.-]+/)*[A-Z][A-Z_-]*\.md)\b")
# The tracked files read for references (data such as fixtures and golden files is not).
TEXT_SUFFIXES = {".py", ".sql", ".md", ".toml", ".in", ".mjs", ".sh", ".yml", ".yaml", ".cfg"}
TEXT_NAMES = {"Makefile", "run", "_order"}
# Paths in the text that are names of something else, not files.
NOT_FILES = {
    # the name of the protobuf file descriptor ingest/decode/wire_messages.py builds in memory
    "budgetscope/wire_trace.proto",
}


def _prose(text: str) -> str:
    """The page without its code blocks (a link in a code block is not a link)."""
    return FENCE.sub("", text)


def slug(heading: str) -> str:
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = re.sub(r"<[^>]+>", "", text).lower()
    text = re.sub(r"[^\w\- ]", "", text)  # \w keeps letters of any script, digits, _
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for match in HEADING.finditer(_prose(page.read_text(encoding="utf-8"))):
        base = slug(match["text"])
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    text = page.read_text(encoding="utf-8")
    found |= set(re.findall(r"<a\s+(?:id|name)=\"([^\"]+)\"", text))
    return found


def links(page: Path, text: str | None = None) -> list[str]:
    """The link targets of `page` (or of `text`, as if it were the page's)."""
    text = page.read_text(encoding="utf-8") if text is None else text
    prose = INLINE_CODE.sub("", _prose(text))
    return [m["target"] for m in LINK.finditer(prose)]


def test_the_pages_exist_and_hold_links() -> None:
    assert all(page.exists() for page in PAGES), [p for p in PAGES if not p.exists()]
    assert len(links(REPO / "README.md")) >= 10


def test_slugs_as_github_makes_them() -> None:
    assert slug("What if: `budgetscope simulate`") == "what-if-budgetscope-simulate"
    assert slug("§7 The weekly report") == "7-the-weekly-report"
    assert slug("OTLP/gRPC under a burst") == "otlpgrpc-under-a-burst"
    assert slug("Security: the dashboard behind the token, CSV and terminal output") == \
        "security-the-dashboard-behind-the-token-csv-and-terminal-output"


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(REPO)) for p in PAGES])
def test_every_relative_link_and_anchor_resolves(page: Path) -> None:
    broken = []
    for target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        path_part, _, anchor = target.partition("#")
        destination = (page.parent / path_part).resolve() if path_part else page
        if REPO not in destination.parents and destination != REPO:
            broken.append(f"{target}: outside the repository")
        elif not destination.exists():
            broken.append(f"{target}: no such file")
        elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
            broken.append(f"{target}: no heading #{anchor} in {destination.relative_to(REPO)}")
        elif anchor and destination.suffix != ".md":
            broken.append(f"{target}: an anchor into a file that is not a page")
    assert not broken, f"{page.relative_to(REPO)}:\n" + "\n".join(broken)


def _placeholder(path: str) -> bool:
    """`queries/sql/NAME.sql`, `bench/NAME.py`: a part in capitals stands for any name."""
    return any(part.split(".")[0].isupper() for part in path.split("/"))


@cache
def _ignored(path: str) -> bool:
    """What a run writes (`bench/out/…`) is named by rule, not committed: git ignores it."""
    found = subprocess.run(["git", "check-ignore", "--no-index", path, path + "/"],
                           cwd=REPO, capture_output=True)
    return found.returncode == 0  # 0: one of the two is ignored; 1: neither


def _module_file(path: str) -> bool:
    """`store/prices/overrides.entries` names a module's attribute: the module must exist."""
    head, name = path.rsplit("/", 1)
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        stem = REPO / head / ".".join(parts[:cut])
        if stem.with_name(stem.name + ".py").is_file() or (stem / "__init__.py").is_file():
            return True
    return False


def resolves(path: str, pattern: bool = False) -> bool:
    """Whether `path`, as written in a file of the repository, names something in it."""
    if path in NOT_FILES or _placeholder(path):
        return True
    if pattern or "*" in path:  # tests/golden/fleet_<report>.csv, queries/sql/*.sql
        return bool(list(REPO.glob(path + ("*" if pattern else ""))))
    return (REPO / path).exists() or _module_file(path) or _ignored(path)


def missing_references(file: Path, text: str | None = None) -> list[str]:
    """`line: reference` for each reference in `file` (or in `text`, as if it were the file's) to
    a file that is not in the repository: a path under one of its folders, a Markdown name in
    capitals, a relative Markdown link."""
    if text is None:
        text = file.read_text(encoding="utf-8", errors="replace")
    missing = []
    for number, line in enumerate(text.splitlines(), 1):
        for match in NAMED.finditer(line):
            if not resolves(match["path"], bool(match["pattern"])):
                missing.append(f"{number}: {match['path']}")
        for match in UPPER_MD.finditer(line):
            if not (_inside(REPO / match["path"]) or _inside(file.parent / match["path"])):
                missing.append(f"{number}: {match['path']}")
    if file.suffix == ".md":
        for target in links(file, text):
            path_part = target.partition("#")[0]
            if path_part and not re.match(r"^[a-z][a-z0-9+.-]*:", target) \
                    and not _inside(file.parent / path_part):
                missing.append(f"link: {target}")
    return missing


def _inside(path: Path) -> bool:
    """`path` exists and is in the repository (a path through .. may exist outside it)."""
    path = path.resolve()
    return path.exists() and (path == REPO or REPO in path.parents)


def _tracked_text() -> list[Path]:
    names = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True,
                           check=True).stdout.splitlines()
    return [REPO / name for name in names
            if (Path(name).suffix in TEXT_SUFFIXES or Path(name).name in TEXT_NAMES)
            and (REPO / name).is_file()]


def test_references_resolve_as_written() -> None:
    absent = "nowhere"  # spelled apart, so that this file does not itself name a missing file
    assert resolves("budgetscope/server/read_api.ServedCommands")  # a module's name
    assert resolves("queries/sql/NAME.sql") and resolves("bench/NAME.py")  # placeholders
    assert resolves("bench/out/traces-1000000.pb-stream") and resolves("bench/out")  # ignored
    assert resolves("tests/golden/" + "fleet_", pattern=True)  # tests/golden/fleet_<report>.csv
    assert not resolves("store/derive/" + absent + ".py")
    assert not resolves("budgetscope/server/" + absent + ".ServedCommands")
    assert not resolves("tests/golden/" + absent, pattern=True)
    page = REPO / "tests" / "project" / "fixture-not-a-file.md"  # beside this file
    outside = "DESIGN" + ".md"  # the contract kept outside the repository, say
    named = f"See {outside} §4 and docs/" + absent + ".md."
    assert missing_references(page, named) == [f"1: docs/{absent}.md", f"1: {outside}"]
    assert missing_references(page, f"[the contract](../{outside})") == [
        f"1: ../{outside}", f"link: ../{outside}"]
    assert missing_references(page, "See README.md, docs/metrics.md §4.") == []
    assert missing_references(page, f"the contract (/elsewhere/{outside})") == [
        f"1: elsewhere/{outside}"]
    bench = "../../bench/README.md"
    assert missing_references(page, f"[the bench]({bench}), {bench}") == []


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(REPO)) for p in PAGES])
def test_every_file_the_page_names_exists(page: Path) -> None:
    """A path such as `store/derive/sql/derive_budgets.sql`, in prose or in code, names a file
    of the repository as it is today (bench/out/ holds what benchmarks write; a name in
    capitals, `queries/sql/NAME.sql`, is a placeholder)."""
    missing = missing_references(page)
    assert not missing, f"{page.relative_to(REPO)} names files that do not exist: {missing}"


def test_every_tracked_file_names_files_that_exist() -> None:
    """Comments, docstrings, SQL and pages everywhere: a file they cite that is not in the
    repository (a contract kept elsewhere, a module since moved) sends a contributor nowhere."""
    missing = [f"{file.relative_to(REPO)}:{where}" for file in _tracked_text()
               for where in missing_references(file)]
    assert not missing, "references to files not in the repository:\n" + "\n".join(missing)
