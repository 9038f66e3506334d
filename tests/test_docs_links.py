"""Every relative link in the README and docs leads somewhere: the file exists and, where the
link names a heading, the heading is there (as GitHub makes its anchor); and every file of
the project a document names in backticks exists. Figures, sections and tests move; a
reader should not land on nothing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCED = re.compile(r"^```.*?^```", re.M | re.S)
HEADING = re.compile(r"^#{1,6} (.+?)\s*$", re.M)
# The project's own folders (not var/, where a running study writes).
PROJECT_FOLDERS = ("analysis", "benchmarks", "docs", "protocols", "static", "study",
                   "templates", "tests")
NAMED_PATH = re.compile(rf"`((?:{'|'.join(PROJECT_FOLDERS)})/[\w./-]*\w)`")


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(document: Path) -> set[str]:
    """Every heading's anchor; a repeated one gets -1, -2, ... as on GitHub."""
    seen: dict[str, int] = {}
    found = set()
    for heading in HEADING.findall(FENCED.sub("", document.read_text())):
        name = anchor(heading)
        found.add(name if name not in seen else f"{name}-{seen[name]}")
        seen[name] = seen.get(name, 0) + 1
    return found


def broken_links(document: Path, root: Path = ROOT) -> list[str]:
    broken = []
    for target in LINK.findall(FENCED.sub("", document.read_text())):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path, _, fragment = target.partition("#")
        destination = (document.parent / path).resolve() if path else document
        if not destination.is_relative_to(root):  # there on this machine, not in a clone
            broken.append(f"{target}: outside the project")
        elif not destination.exists():
            broken.append(f"{target}: no such file")
        elif fragment and destination.suffix == ".md" and fragment not in anchors(destination):
            broken.append(f"{target}: no such heading")
    return broken


def missing_paths(document: Path) -> list[str]:
    """The project's files and folders a document names in backticks that do not exist."""
    return [path for path in NAMED_PATH.findall(document.read_text())
            if not (ROOT / path).exists()]


def test_the_anchor_of_a_heading_is_githubs():
    assert anchor("A worker's CPU a message falls (issue #29)") == \
        "a-workers-cpu-a-message-falls-issue-29"
    assert anchor("How the journey runs (`study/web/participant/real_teams/`)") == \
        "how-the-journey-runs-studywebparticipantreal_teams"


def test_a_broken_link_is_found(tmp_path):
    (tmp_path / "there.md").write_text("# Sizing a server: people per core\n")
    page = tmp_path / "page.md"
    page.write_text("[ok](there.md#sizing-a-server-people-per-core) [gone](there.md#sizing) "
                    "[lost](nowhere.md)\n```sh\n[ignored](code.md)\n```\n")
    assert broken_links(page, tmp_path) == ["there.md#sizing: no such heading",
                                            "nowhere.md: no such file"]


def test_a_link_out_of_the_project_is_broken_even_where_it_resolves(tmp_path):
    (tmp_path / "shared.md").write_text("# Beside the project\n")
    docs = tmp_path / "project" / "docs"
    docs.mkdir(parents=True)
    (docs / "page.md").write_text("[beside](../../shared.md)\n")
    assert broken_links(docs / "page.md", tmp_path / "project") == [
        "../../shared.md: outside the project"]


def test_a_missing_path_is_found(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("`tests/test_docs_links.py`, `study/web/`, `tests/test_gone.py`, "
                    "`protocols/demo.toml`\n")
    assert missing_paths(page) == ["tests/test_gone.py"]


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_link_leads_somewhere(document):
    assert broken_links(document) == []


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_file_named_exists(document):
    assert missing_paths(document) == []
