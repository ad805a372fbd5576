"""Every relative link and #anchor in the user's pages resolves, and every file of the repository
they name exists: a page moved or renamed, or a heading reworded, fails here instead of leaving
a reader on GitHub's 404 or at the top of a page.

Anchors are computed as GitHub computes them from headings (lowercased, punctuation dropped,
spaces made hyphens, a repeated heading numbered -1, -2, …)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", REPO / "CONTRIBUTING.md", REPO / "bench" / "README.md",
         REPO / "sdk" / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.S | re.M)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\((?P<target>[^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^(#{1,6})\s+(?P<text>.+?)\s*#*\s*$", re.M)
# A file of the repository named in prose or in code: a top-level folder, then a path.
TOP = ("budgetscope", "ingest", "store", "queries", "dashboard", "simulation", "sdk",
       "sample_traces", "tests", "bench", "docs")
NAMED = re.compile(rf"(?<![\w./-])(?:{'|'.join(TOP)})/[\w./-]*\w\.(?:py|sql|md|toml|gz)\b")


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


def links(page: Path) -> list[str]:
    prose = INLINE_CODE.sub("", _prose(page.read_text(encoding="utf-8")))
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


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(REPO)) for p in PAGES])
def test_every_file_the_page_names_exists(page: Path) -> None:
    """A path such as `store/derive/sql/derive_budgets.sql`, in prose or in code, names a file
    of the repository as it is today (bench/out/ holds what benchmarks write; a name in
    capitals, `queries/sql/NAME.sql`, is a placeholder)."""
    text = page.read_text(encoding="utf-8")
    missing = sorted({name for name in NAMED.findall(text)
                      if not name.startswith("bench/out/") and not Path(name).stem.isupper()
                      and not (REPO / name).exists()})
    assert not missing, f"{page.relative_to(REPO)} names files that do not exist: {missing}"
