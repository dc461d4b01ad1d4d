"""``docs/architecture.md`` stays true: its layer list is exactly the import-linter layers contract that
``lint-imports`` enforces, every package of ``src/kafkaguard`` is in it (a package split into layered subpackages,
as ``audit``, holds nothing of its own), and its package table names every layered package."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "src" / "kafkaguard"
DOC = ROOT / "docs" / "architecture.md"
CONTRACT = "kafkaguard is layered (docs/architecture.md)"
#: The block of the page marked ``<!-- tested: layers ... -->`` (tests/docs/test_blocks_marked.py).
MARKER = "layers"


def documented_layers() -> list[list[str]]:
    text = DOC.read_text("utf-8")
    block = re.search(rf"<!-- tested: {MARKER}[^>]*-->\s*```text\n(.*?)```", text, re.S)
    assert block is not None, "docs/architecture.md has no layers block"
    return [[name.strip() for name in line.split("|")] for line in block.group(1).strip().splitlines()]


def contract_layers() -> list[list[str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
    (contract,) = [c for c in config["tool"]["importlinter"]["contracts"] if c["name"] == CONTRACT]
    return [
        [name.strip().strip("()").removeprefix("kafkaguard.") for name in layer.split("|")]
        for layer in contract["layers"]
    ]


def test_the_documented_layers_are_the_enforced_contract() -> None:
    assert documented_layers() == contract_layers()


def _packages(directory: Path, prefix: str = "") -> dict[str, Path]:
    return {
        prefix + path.name: path
        for path in sorted(directory.iterdir())
        if path.is_dir() and (path / "__init__.py").exists()
    }


def test_every_package_and_module_of_src_is_in_a_layer() -> None:
    layered = {name for layer in contract_layers() for name in layer}
    missing = []
    for name, path in _packages(SOURCE).items():
        if name in layered:
            continue
        # Not layered itself: then each of its subpackages is, and it has no module of its own besides __init__.
        subpackages = _packages(path, f"{name}.")
        own_modules = [module.name for module in path.glob("*.py") if module.name != "__init__.py"]
        if not subpackages or own_modules or not set(subpackages) <= layered:
            missing.append(name)
    modules = [path.stem for path in SOURCE.glob("*.py") if path.name != "__init__.py"]
    missing += [name for name in modules if name not in layered]
    assert missing == [], f"not in docs/architecture.md's layers (nor the contract): {missing}"


def test_the_package_table_names_every_layered_package() -> None:
    table = DOC.read_text("utf-8").split("## The packages", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`([a-z_.]+)`", table))
    layered = {name for layer in contract_layers() for name in layer}
    assert layered - named == set()
