"""The architecture page's pictures are SVGs committed beside their Graphviz sources (docs/diagrams/, drawn by
scripts/diagrams), so the site shows them with no network and no script: each source has its SVG, the SVG parses, it
carries every label of its source (a source edited without redrawing fails here), and the page shows each one."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from tests.docs.blocks import DOCS

DIAGRAMS = DOCS / "diagrams"
SOURCES = sorted(DIAGRAMS.glob("*.dot"))
SVG = "{http://www.w3.org/2000/svg}"


def labels(source: Path) -> set[str]:
    """Every line of every label in a Graphviz source (a label's lines are separated by ``\\n``)."""
    found = re.findall(r'label="((?:[^"\\]|\\.)*)"', source.read_text("utf-8"))
    return {line for label in found for line in label.split("\\n") if line}


def test_there_are_pictures() -> None:
    assert [source.stem for source in SOURCES] == ["processes", "request"]


@pytest.mark.parametrize("source", SOURCES, ids=[source.stem for source in SOURCES])
def test_each_svg_is_drawn_from_its_source_as_it_stands(source: Path) -> None:
    drawn = source.with_suffix(".svg")
    assert drawn.is_file(), f"{drawn.name} is missing: run scripts/diagrams"
    texts = {"".join(text.itertext()).strip() for text in ElementTree.parse(drawn).iter(f"{SVG}text")}  # noqa: S314 - our own file
    missing = sorted(labels(source) - texts)
    assert missing == [], f"{drawn.name} lacks labels of {source.name} (run scripts/diagrams): {missing}"


def test_the_architecture_page_shows_each_picture_and_no_script_drawn_one() -> None:
    page = (DOCS / "architecture.md").read_text("utf-8")
    for source in SOURCES:
        assert f"](diagrams/{source.stem}.svg)" in page, source.stem
    assert not [path.name for path in DOCS.rglob("*.md") if "```mermaid" in path.read_text("utf-8")], (
        "a mermaid fence needs a script from a CDN to draw: draw the picture with scripts/diagrams instead"
    )
