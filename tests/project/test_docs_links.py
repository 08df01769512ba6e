"""The README and the reference in docs/ hold together: every relative link lands on a file that
exists and, where it names a heading (``page.md#anchor``), on a heading of that page; the README
stays short enough to read on arrival; and no page, nor any comment or string of the package,
cites a document outside the repository."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import PACKAGE_DIR, REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
README_MAX_LINES = 250

# [text](target): the target up to the first space or closing parenthesis (a title may follow).
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_FENCE = re.compile(r"^(```|~~~)")


def _prose(text: str) -> str:
    """The page without its fenced code blocks: a capture or a shell line is not a link."""
    out, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            out.append(line)
    return "\n".join(out)


def anchor_of(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, code marks and punctuation dropped, spaces
    made dashes."""
    text = heading.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading's anchor on a page, the second of two equal headings numbered as GitHub does."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    for line in _prose(page.read_text(encoding="utf-8")).splitlines():
        m = re.match(r"^#{1,6}\s+(.*)$", line)
        if not m:
            continue
        base = anchor_of(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(page: Path) -> list[str]:
    return _LINK.findall(_prose(page.read_text(encoding="utf-8")))


def test_the_pages_exist() -> None:
    """The reference the README points into is there (a rename would leave the README dangling)."""
    names = {p.name for p in PAGES}
    for needed in ("queue-file.md", "scheduling.md", "dashboard.md", "cli.md", "architecture.md"):
        assert needed in names, needed


def broken_links(page: Path, root: Path = REPO) -> list[str]:
    """Each link of ``page`` to a missing file, or to a heading its page does not have. Links to
    the web are not followed (the tests run offline)."""
    broken = []
    for target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:, ...
            continue
        path_part, _, anchor = target.partition("#")
        dest = (page.parent / path_part).resolve() if path_part else page
        if not dest.exists():
            broken.append(f"{target}: no file {dest.relative_to(root)}")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.relative_to(root)}")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page: Path) -> None:
    """A link to a file of the repository names one that exists, and a #anchor one of its
    headings."""
    broken = broken_links(page)
    assert broken == [], "\n".join(broken)


def test_the_checker_sees_a_broken_link(tmp_path: Path) -> None:
    """The check above can fail: a missing file and a missing heading are both reported, and
    good links are not."""
    (tmp_path / "b.md").write_text("# B\n")
    page = tmp_path / "a.md"
    page.write_text(
        "# Top\n\n## Some `key` here\n\n"
        "[x](c.md) [y](#nope) [z](#top) [w](b.md#b) [v](b.md#none) [u](https://x.org/a.md)\n"
    )
    assert anchors(page) == {"top", "some-key-here"}
    assert broken_links(page, tmp_path) == [
        "c.md: no file c.md",
        "#nope: no heading #nope in a.md",
        "b.md#none: no heading #none in b.md",
    ]


def test_links_inside_code_blocks_are_not_links(tmp_path: Path) -> None:
    page = tmp_path / "a.md"
    page.write_text("```\n[x](nowhere.md)\n# not a heading\n```\n# Real\n")
    assert links(page) == []
    assert anchors(page) == {"real"}


def test_the_readme_stays_short() -> None:
    """The README is the first screen and the package index's page: the reference is in docs/."""
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, len(lines)


def test_the_readme_first_screen_has_both_set_up_commands() -> None:
    """A newcomer sees, without scrolling, how to try gtui on simulated GPUs and how to run the
    tests; the test command is exactly the one CI runs."""
    first_screen = "\n".join((REPO / "README.md").read_text(encoding="utf-8").splitlines()[:40])
    assert ".venv/bin/gtui sample_queues/demo.toml" in first_screen
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    m = re.search(r"\(python3 -m venv \.venv && (.*?) \\\n\s*&& (.*?)\)", ci)
    assert m, "the test command in .ci/run"
    ci_command = f"python3 -m venv .venv && {m.group(1)} && {m.group(2)}"
    assert ci_command in first_screen, ci_command


def test_no_page_cites_the_design_contract_or_issue_numbers() -> None:
    """The docs say everything in their own words: no page sends the reader to a document
    outside the repository or to a ticket number."""
    cited = []
    for page in PAGES:
        for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(r"DESIGN(\.md)?\b|\b[Ii]ssues? \d|\bseeds? 0\d\d\b", line):
                cited.append(f"{page.relative_to(REPO)}:{n}: {line.strip()[:80]}")
    assert cited == [], "\n".join(cited)


# What a reader of the package cannot open: a ticket number ("issue 14", "issues 19.2", "#14"),
# the design contract ("DESIGN.md 4.5"), the seed documents ("seed 004", "the seed's rule", "the
# seeds") and round labels ("stop 27", "round 3").
_CITATION = re.compile(
    r"\b[Ii]ssues? #?\d|(?<![\w&#])#\d+\b|\bDESIGN\b|\b[Ss]eeds? \d|\b[Ss]eed's\b"
    r"|\b[Tt]he seeds\b|\b[Ss]top \d+\b|\b[Rr]ound \d+\b"
)
# Text that matches and is not a citation: the terminal's own escape ``ESC #8`` (DECALN) and a
# six-digit colour such as ``#123456``.
_NOT_A_CITATION = re.compile(r"ESC #\d|#[0-9a-fA-F]{6}\b")


def citations(text: str) -> list[str]:
    """The lines of ``text`` that cite something outside the repository, numbered from 1.

    A random seed, the ``reserve_rule = "seed"`` setting and a variable named ``seeds`` are
    words about the code, so they do not match; an allowed span is blanked before the search."""
    found = []
    for n, line in enumerate(text.splitlines(), 1):
        if _CITATION.search(_NOT_A_CITATION.sub("", line)):
            found.append(f"{n}: {line.strip()[:80]}")
    return found


@pytest.mark.parametrize(
    "line",
    [
        "# Issue 19.2, additive: name -> type.",
        '"""Deliver notifications (issue 19.4): the command."""',
        "(issue 7, item 1)",
        "see #14 for why",
        "the peak (DESIGN.md 4.5) of the attempt",
        "names the GPU gtui gave it (seed 004).",
        "most free memory first (the seed's rule)",
        "as the seeds ask",
        "fixed in stop 27",
    ],
)
def test_the_citation_check_catches_a_planted_citation(line: str) -> None:
    """The checker is not vacuous: each kind of citation, planted among plain lines, is found."""
    text = f"x = 1\n{line}\ny = 2\n"
    assert citations(text) == [f"2: {line.strip()}"]


@pytest.mark.parametrize(
    "line",
    [
        'reserve_rule: Literal["strict", "seed"] = "strict"',
        "seeds = {q for q, p in procs.items()}",
        "the same seed and settings diverges the same way",
        "``ESC c`` resets it, ``ESC #8`` fills it with E's",
        'env = "SEED=1 WANDB_MODE=disabled"',
        'style = "#1e1e2e"',
        'background = "#202020"',
    ],
)
def test_the_citation_check_passes_words_about_the_code(line: str) -> None:
    """The explicit exceptions stay allowed: a random seed, the ``seed`` reserve rule, a
    terminal escape and a colour are not citations."""
    assert citations(line) == []


def test_no_package_file_cites_an_issue_design_or_seed() -> None:
    """Comments, docstrings and messages in app/ say what and why in their own words: a reader
    of the repository can open everything they point at."""
    cited = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        for hit in citations(path.read_text(encoding="utf-8")):
            cited.append(f"{path.relative_to(REPO)}:{hit}")
    assert cited == [], "\n".join(cited)
