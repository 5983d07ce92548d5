"""The documentation's links and the sections that messages and docstrings point to exist."""

import re
from pathlib import Path

import pytest

from tests.helpers import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "benchmarks" / "README.md"]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def anchors(page: Path) -> set[str]:
    """GitHub's ids of a page's headings: lower case, punctuation dropped, spaces to dashes."""
    out = set()
    for line in page.read_text().splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            out.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return out


def links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # not inside code blocks
    return [t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_of_a_page_reaches_a_file_and_a_heading(page):
    broken = []
    for target in links(page):
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif anchor and anchor not in anchors(file):
            broken.append(f"{target}: no heading #{anchor} in {file.relative_to(ROOT)}")
    assert not broken, broken


def test_every_docs_page_the_code_names_exists_with_the_section_it_names():
    named = re.compile(r"(docs/[a-z_]+\.md|benchmarks/README\.md)(?:, \"([^\"]+)\")?")
    missing = []
    for source in sorted((ROOT / "sweep").rglob("*.py")):
        text = re.sub(r"\s*\n\s*", " ", source.read_text())  # a section may wrap in a docstring
        for page, section in named.findall(text):
            file = ROOT / page
            if not file.exists():
                missing.append(f"{source.relative_to(ROOT)}: {page}")
            elif section and re.sub(r"[^\w\- ]", "", section.lower()).replace(" ", "-") not in anchors(file):
                missing.append(f"{source.relative_to(ROOT)}: {page}, {section!r}")
    assert not missing, missing


def test_the_docs_folder_is_reachable_from_the_readme():
    linked = {(ROOT / t.partition("#")[0]).resolve() for t in links(ROOT / "README.md")}
    unlinked = [p.name for p in (ROOT / "docs").glob("*.md") if p.resolve() not in linked]
    assert not unlinked, unlinked


def test_the_docs_list_the_statuses_a_retry_runs_as_the_code_does():
    from sweep.wire.protocol import NOT_DONE

    listed = "`, `".join(NOT_DONE[:-1]) + f"` or `{NOT_DONE[-1]}"
    for page in ("cli.md", "recipe.md"):
        text = " ".join((ROOT / "docs" / page).read_text().split())
        assert f"`{listed}`" in text, (page, listed)
    stale = re.compile(r"failed, timed[- ]out|timed out, stalled or was killed")
    for path in [*(ROOT / "docs").glob("*.md"), *(ROOT / "sweep").rglob("*.py")]:
        assert not stale.search(path.read_text()), path
