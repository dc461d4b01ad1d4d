"""Every fenced block of the README and of the documentation pages runs in a test or says why it cannot: the line
before it is ``<!-- tested: NAME -->``, with NAME named by a test under tests/ (which runs it), or
``<!-- illustrative: why -->``."""

from __future__ import annotations

import re
from pathlib import Path

from tests.docs.blocks import ROOT, blocks, pages

HERE = Path(__file__).resolve()


def test_every_block_is_tested_or_marked_illustrative() -> None:
    unmarked = [block.where() for page in pages() for block in blocks(page) if not (block.tested or block.illustrative)]
    assert unmarked == [], (
        "blocks without <!-- tested: NAME --> or <!-- illustrative: why --> on the line before them: "
        + ", ".join(unmarked)
    )


def test_every_marked_block_is_named_by_a_test() -> None:
    tests = [
        path.read_text("utf-8")
        for path in (ROOT / "tests").rglob("*.py")
        if path.resolve() != HERE and path.name != "blocks.py"
    ]
    names = [block.tested for page in pages() for block in blocks(page) if block.tested]
    assert names, "no block is marked tested"
    assert len(names) == len(set(names)), f"a tested name is used twice: {sorted(names)}"
    unrun = [name for name in names if not any(f'"{name}"' in text for text in tests)]
    assert unrun == [], f"blocks marked tested that no test names (as a string): {unrun}"


def test_every_test_an_illustrative_block_names_exists() -> None:
    """An illustrative block often says which test covers it instead ("tests/cli/test_whois.py runs each form"): the
    file (or the files a glob names) is there, so the pointer does not outlive a rename."""
    named = [(block.where(), path) for page in pages() for block in blocks(page)
             for path in re.findall(r"tests/[\w/*.-]+\.py|tests/[\w/-]+/", block.illustrative or "")]  # fmt: skip
    assert named, "no illustrative block names a test"
    missing = [f"{where}: {path}" for where, path in named if not list(ROOT.glob(path.rstrip("/")))]
    assert missing == [], f"illustrative blocks name tests that do not exist: {missing}"


def test_the_readme_stays_short() -> None:
    lines = (ROOT / "README.md").read_text("utf-8").count("\n")
    assert lines <= 200, f"README.md has {lines} lines: the manual is docs/, the README a page of links into it"
