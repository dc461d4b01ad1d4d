"""The documentation site builds strictly (MkDocs: every nav entry, internal link and anchor resolves, or the build
fails) from a copy of docs/ with the reference pages generated into it, so the tree is left as it was; every link of
the built pages to another page or file of the site resolves; the README's links into docs/ resolve."""

from __future__ import annotations

import html.parser
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from urllib.parse import unquote, urlsplit

import pytest

from tests.docs.blocks import ROOT

BIN = Path(sys.executable).parent


def reference_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("reference", ROOT / "scripts" / "reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("docs")
    shutil.copytree(ROOT / "docs", work / "docs", ignore=shutil.ignore_patterns(*sorted(_generated())))
    shutil.copy(ROOT / "mkdocs.yml", work / "mkdocs.yml")
    reference_module().write(work / "docs" / "reference")
    built = subprocess.run(
        [str(BIN / "mkdocs"), "build", "--strict", "--config-file", str(work / "mkdocs.yml"),
         "--site-dir", str(work / "site")],
        cwd=work, env=os.environ | {"NO_MKDOCS_2_WARNING": "1"}, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert built.returncode == 0, built.stdout + built.stderr
    assert "WARNING" not in built.stderr, built.stderr
    return work / "site"


def _generated() -> set[str]:
    from tests.docs.blocks import GENERATED

    return GENERATED


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is None:
                continue
            if name == "id":
                self.ids.add(value)
            if (tag, name) in {("a", "href"), ("img", "src"), ("link", "href"), ("script", "src")}:
                self.links.append(value)


def test_the_site_builds_strictly_with_every_page_of_the_nav(site: Path) -> None:
    for page in ("index", "getting-started/proxy", "reference/settings", "reference/cli", "reference/metrics",
                 "reference/apis", "reference/audit-events", "semantics", "architecture", "benchmarks"):  # fmt: skip
        assert (site / f"{page}.html").is_file(), page


def test_every_internal_link_of_the_built_site_resolves(site: Path) -> None:
    parsed: dict[Path, _Links] = {}
    for page in site.rglob("*.html"):
        links = _Links()
        links.feed(page.read_text("utf-8"))
        parsed[page] = links
    broken = []
    for page, links in parsed.items():
        if page.name == "404.html":
            continue  # MkDocs writes it with absolute links, for a server that answers every missing path with it
        for link in links.links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc or link.startswith(("mailto:", "javascript:")):
                continue
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{page.relative_to(site)} → {link}")
            elif parts.fragment and target.suffix == ".html":
                ids = parsed[target].ids if target in parsed else set()
                if parts.fragment not in ids:
                    broken.append(f"{page.relative_to(site)} → {link} (no such anchor)")
    assert broken == [], "\n".join(broken)


def test_the_readmes_links_into_docs_resolve() -> None:
    text = (ROOT / "README.md").read_text("utf-8")
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    local = [link for link in links if not urlsplit(link).scheme]
    assert any(link.startswith("docs/") for link in local), "the README links into docs/"
    missing = [link for link in local if not (ROOT / unquote(urlsplit(link).path)).exists()]
    assert missing == [], f"README.md links to files that do not exist: {missing}"


class _Loads(html.parser.HTMLParser):
    """What a page makes the browser fetch by itself (not the links a reader may follow), and its mermaid blocks."""

    def __init__(self) -> None:
        super().__init__()
        self.loads: list[str] = []
        self.mermaid = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if "mermaid" in (values.get("class") or "").split():
            self.mermaid += 1
        source = values.get("href") if tag == "link" else values.get("src") if tag in {"script", "img"} else None
        if source is not None:
            self.loads.append(source)


def test_the_built_site_reads_offline(site: Path) -> None:
    """No page fetches a font, stylesheet, script or image from another host, and none has a mermaid block (Material
    draws those with a script from a CDN): offline, every page looks as it does online."""
    remote = []
    for page in site.rglob("*.html"):
        loads = _Loads()
        loads.feed(page.read_text("utf-8"))
        remote += [f"{page.relative_to(site)} → {link}" for link in loads.loads if urlsplit(link).netloc]
        remote += [f"{page.relative_to(site)}: {loads.mermaid} mermaid block(s)"] if loads.mermaid else []
    assert remote == [], "\n".join(remote)
