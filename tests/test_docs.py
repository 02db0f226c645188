"""The docs as a reader meets them: every relative link in README.md and docs/ resolves (a file,
and a heading where the link names one), no tracker words ("issue 17", "stop 23", "finding 4")
that mean nothing to a reader, no paths of the machines the project was built on, and README
short enough to be the front door."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
README_MAX_LINES = 130

_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
_TRACKER = re.compile(r"\b(issues?|stops?|findings?)\s+#?\d", re.IGNORECASE)
_MACHINE_PATH = re.compile(r"(?<![\w.])/(work|tmp)/")


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _prose(text: str) -> str:
    """The text without fenced code blocks (a bash block may name /tmp on purpose)."""
    return re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)


def _anchors(md: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces as hyphens."""
    out: set[str] = set()
    for line in _prose(md.read_text()).splitlines():
        m = re.match(r"#{1,6}\s+(.*)", line)
        if m:
            slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            n, base = 0, slug
            while slug in out:
                n += 1
                slug = f"{base}-{n}"
            out.add(slug)
    return out


def links(md: Path) -> list[str]:
    return [a or b for a, b in _LINK.findall(_prose(md.read_text()))]


@pytest.mark.parametrize("md", DOCS, ids=_rel)
def test_relative_links_resolve(md: Path) -> None:
    broken = []
    for link in links(md):
        if re.match(r"[a-z]+:", link):  # http:, https:, mailto:
            continue
        path, _, anchor = link.partition("#")
        target = (md.parent / path).resolve() if path else md
        if not target.exists():
            broken.append(f"{link} (no file)")
        elif anchor and target.suffix == ".md" and anchor not in _anchors(target):
            broken.append(f"{link} (no heading #{anchor})")
    assert not broken, f"{_rel(md)}: {broken}"


@pytest.mark.parametrize("md", DOCS, ids=_rel)
def test_no_tracker_words_or_machine_paths(md: Path) -> None:
    text = md.read_text()
    found = [m.group(0) for m in _TRACKER.finditer(text)]
    found += [line.strip() for line in text.splitlines() if _MACHINE_PATH.search(line)]
    assert not found, f"{_rel(md)}: {found[:10]}"


def test_readme_is_the_front_door() -> None:
    n = len((ROOT / "README.md").read_text().splitlines())
    assert n <= README_MAX_LINES, f"README.md has {n} lines (at most {README_MAX_LINES}: details belong in docs/)"


def test_the_checks_catch_what_they_look_for(tmp_path: Path) -> None:
    """The patterns find a tracker word, a machine path and a dangling link in a made-up doc."""
    (tmp_path / "a.md").write_text("# Title\n\nSee [b](b.md), [t](#title), [x](#nope) (issue 17, stop 3) in /work/x.\n")
    md = tmp_path / "a.md"
    assert _TRACKER.findall(md.read_text()) and _MACHINE_PATH.search(md.read_text())
    assert links(md) == ["b.md", "#title", "#nope"]
    assert "title" in _anchors(md) and "nope" not in _anchors(md)
