"""Every relative link in README.md and docs/*.md leads somewhere: the file exists and, where the
link names a heading (`page.md#a-heading`), the page has that heading, slugged as GitHub does.

Also holds the pages to what they promise a user: no issue numbers, no talk of how the work was
organised.
"""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# [text](target) and ![alt](target); the target ends at the first space or closing bracket.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading)
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading anchor of a page, numbered as GitHub numbers repeated headings."""
    seen: dict[str, int] = {}
    out = set()
    for heading in HEADING.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
        slug = github_slug(heading)
        n = seen.get(slug, 0)
        out.add(slug if n == 0 else f"{slug}-{n}")
        seen[slug] = n + 1
    return out


def broken_links(page: Path) -> list[str]:
    """The relative links of one page that lead nowhere, each as `page: target (why)`."""
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    bad = []
    for target in LINK.findall(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path_part, _, anchor = target.partition("#")
        dest = (page.parent / path_part).resolve() if path_part else page
        name = page.relative_to(ROOT) if page.is_relative_to(ROOT) else page.name
        if not dest.exists():
            bad.append(f"{name}: {target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{name}: {target} (no such heading)")
    return bad


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_relative_links_resolve(page):
    assert broken_links(page) == []


def test_checker_finds_a_broken_file_and_heading(tmp_path):
    (tmp_path / "other.md").write_text("# A heading: with `code`\n\n## Again\n## Again\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md#a-heading-with-code) [ok2](other.md#again-1) [web](https://x.org/y)\n"
        "[gone](missing.md) [bad anchor](other.md#nowhere)\n"
        "```\n[in a code block](ignored.md)\n```\n"
    )
    assert broken_links(page) == [
        "page.md: missing.md (no such file)",
        "page.md: other.md#nowhere (no such heading)",
    ]


def test_github_slugs():
    assert github_slug("Endgame database (2026-11-23)") == "endgame-database-2026-11-23"
    assert github_slug("The play server (`python -m play`)") == "the-play-server-python--m-play"
    assert github_slug("Player specs") == "player-specs"


def ci_commands() -> list[str]:
    """The commands .ci/run runs, in order: its lines that are neither comments nor shell set-up."""
    lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    skip = ("#", "set ", "cd ")
    return [line.strip() for line in lines if line.strip() and not line.startswith(skip)]


def test_ci_runs_what_the_readme_says():
    """CI runs the README's set-up and test commands, word for word, and nothing else."""
    readme_blocks = "\n".join(FENCE.findall((ROOT / "README.md").read_text(encoding="utf-8")))
    readme_commands = {line.split("#")[0].strip() for line in readme_blocks.splitlines()}
    assert ci_commands() == ["bash scripts/setup.sh", ".venv/bin/python -m pytest -q"]
    assert [c for c in ci_commands() if c not in readme_commands] == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_pages_speak_to_users(page):
    text = page.read_text(encoding="utf-8")
    assert re.findall(r"issue #\d+|\blent\b", text, flags=re.I) == []
