"""The fenced blocks of the README and the documentation pages, with the marker before each.

Every block is preceded, on the line right before its opening fence, by ``<!-- tested: NAME ... -->`` (a test runs
it: NAME appears in a test under tests/) or ``<!-- illustrative: why -->`` (it needs what a test cannot have, such
as your cluster, and says so). ``test_blocks_marked`` enforces that; the tests that run blocks find them by NAME.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
#: Written by scripts/reference.py at build time (not committed): tables only, no blocks.
GENERATED = {"settings.md", "cli.md", "metrics.md", "apis.md", "audit-events.md"}

MARKER = re.compile(r"<!-- (?:tested: (?P<name>[\w.-]+)[^>]*|illustrative: (?P<why>[^>]+)) -->$")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    language: str
    text: str
    marker: str  # the line before the fence

    @property
    def tested(self) -> str | None:
        found = MARKER.match(self.marker)
        return found["name"] if found is not None else None

    @property
    def illustrative(self) -> str | None:
        found = MARKER.match(self.marker)
        return found["why"] if found is not None else None

    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def pages() -> list[Path]:
    """The README and every page of docs/ that is committed (the generated reference pages are not)."""
    found = [ROOT / "README.md"]
    for path in sorted(DOCS.rglob("*.md")):
        if path.parent.name == "reference" and path.name in GENERATED:
            continue
        found.append(path)
    return found


def blocks(page: Path) -> list[Block]:
    lines = page.read_text("utf-8").split("\n")
    found = []
    start: int | None = None
    for number, line in enumerate(lines):
        if not line.startswith("```"):
            continue
        if start is None:
            start = number
            continue
        opening = lines[start]
        marker = lines[start - 1] if start > 0 else ""
        found.append(Block(page, start + 1, opening[3:].strip(), "\n".join(lines[start + 1 : number]), marker))
        start = None
    assert start is None, f"{page.relative_to(ROOT)}: a fence opened at line {start + 1} is never closed"
    return found


def marked_block(name: str) -> Block:
    """The one block marked ``<!-- tested: name -->``, wherever it is."""
    matches = [block for page in pages() for block in blocks(page) if block.tested == name]
    assert len(matches) == 1, f"{len(matches)} blocks are marked <!-- tested: {name} --> (one expected)"
    return matches[0]
