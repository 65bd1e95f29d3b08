"""The README and the guides in docs/ as a reader meets them (issue 39): every link leads to a
file and heading that exist, every ``trainer_run.`` name they give can be imported, the README
stays a front door (at most 450 lines, each topic a link away), the config groups are tabled
once, and trust is explained once, in docs/trust.md."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").exists())
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, *DOCS]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
NAME = re.compile(r"\btrainer_run(?:\.[A-Za-z_]\w*)+")


def _prose(page: Path) -> str:
    """The page without its fenced code blocks (a ``#`` there is a comment, not a heading)."""
    return re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    return {_slug(h) for h in re.findall(r"^#+ (.*)$", _prose(page), flags=re.M)}


def _links(page: Path) -> list[str]:
    """The page's links to files of this repository (web addresses left out)."""
    return [t for t in LINK.findall(_prose(page)) if not re.match(r"[a-z]+:", t)]


def _resolves(name: str) -> bool:
    """Whether the dotted ``name`` is a module, or an attribute reached from the longest
    importable module in it."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            if not hasattr(found, part):
                return False
            found = getattr(found, part)
        return True
    return False


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_link_leads_to_a_file_and_heading_that_exist(page):
    broken = []
    for target in _links(page):
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            broken.append(f"{target} (no heading #{anchor} in {linked.name})")
    assert not broken, f"{page.name}: {broken}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_python_name_a_page_gives_can_be_imported(page):
    missing = sorted(n for n in set(NAME.findall(page.read_text())) if not _resolves(n))
    assert not missing, f"{page.name} names {missing}, which do not exist"


def test_the_readme_names_the_library_not_the_command_layer():
    """``trainer_run.cli`` is the command's own package and moves as the command changes; a
    reader who builds from a config calls the library (``trainer_run.targets.instantiate``)."""
    named = sorted(set(re.findall(r"trainer_run\.cli\.\w[\w.]*", README.read_text())))
    assert not named, f"the README points readers at the command layer: {named}"
    assert "`trainer_run.targets.instantiate`" in README.read_text()


def test_the_readme_is_a_front_door_of_at_most_450_lines():
    count = len(README.read_text().splitlines())
    assert count <= 450, f"README.md has {count} lines; move detail into docs/"
    guides = {(README.parent / t.partition("#")[0]).resolve() for t in _links(README)}
    unlinked = [d.name for d in DOCS if d.resolve() not in guides]
    assert not unlinked, f"guides the README does not link to: {unlinked}"


def _group_rows(page: Path) -> set[str]:
    """The config groups a page tables: rows that open with a group's name in backticks."""
    groups = ("backend", "model", "dataset", "optimizer", "scheduler", "updater", "loss_scale",
              "precision", "kvstore", "logger", "trainer")
    return {g for g in groups if re.search(rf"^\| `{g}` \|", page.read_text(), flags=re.M)}


def test_the_config_groups_are_tabled_once_in_the_config_reference():
    tabled = {p.name: rows for p in PAGES if len(rows := _group_rows(p)) >= 3}
    assert list(tabled) == ["config.md"], f"the table of config groups is in {sorted(tabled)}"
    assert len(tabled["config.md"]) == 11
    assert "docs/config.md#groups" in README.read_text()


# What only docs/trust.md may explain; any other page says one sentence and links there.
TRUST_DETAIL = (
    r"as a pickle",                                 # why a config is code
    r"HMAC",                                        # how runs are signed
    r"resolved (before|first)",                     # what is checked is what is built
    r"(stays|remains) unsigned",                    # a resume on trust does not sign
    r"trainer-run\.json`? ?\(`?\{",                 # the record that makes a folder a run
)


@pytest.mark.parametrize("page", [p for p in PAGES if p.name != "trust.md"],
                         ids=lambda p: p.name)
def test_trust_is_explained_in_docs_trust_md_alone(page):
    text = page.read_text()
    found = [p for p in TRUST_DETAIL if re.search(p, text)]
    assert not found, f"{page.name} explains trust again ({found}); link to docs/trust.md instead"
    if re.search(r"\btrust=true\b", text) or "trust=True" in text:
        assert "trust.md" in text, f"{page.name} mentions trust=true without linking docs/trust.md"
