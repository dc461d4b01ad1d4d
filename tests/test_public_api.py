"""The public surface: ``kafkaguard.__all__`` is sorted and exact, and ``import kafkaguard`` needs no extra
(STYLE.md Part 3 item 12)."""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import subprocess
import sys
import types

import pytest

import kafkaguard

#: Modules that only the optional extras (server, console, cli, spark) may bring in.
FORBIDDEN = frozenset(
    {"fastapi", "starlette", "uvicorn", "typer", "rich", "pyspark", "pyarrow", "pandas", "kio", "asyncio"}
    | {"pydantic", "pydantic_settings", "yaml", "confluent_kafka", "prometheus_client"}
)


def public_names(module: types.ModuleType) -> set[str]:
    """Names bound in the module that are neither private, nor submodules, nor ``from __future__`` features."""
    return {
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType) and name != "annotations"
    }


def test_all_is_sorted():
    assert kafkaguard.__all__ == sorted(kafkaguard.__all__)
    assert len(set(kafkaguard.__all__)) == len(kafkaguard.__all__)


def test_all_equals_the_names_exported():
    assert set(kafkaguard.__all__) == public_names(kafkaguard) | {"__version__"}


def test_every_exported_name_resolves():
    for name in kafkaguard.__all__:
        assert getattr(kafkaguard, name) is not None, name


def test_version_is_the_package_version():
    # The installed distribution's version (pyproject.toml's), so that the two cannot drift apart.
    assert kafkaguard.__version__ == importlib.metadata.version("kafkaguard")


def test_star_import_gives_exactly_all():
    namespace: dict[str, object] = {}
    exec("from kafkaguard import *", namespace)  # noqa: S102 - the behaviour under test
    assert set(namespace) - {"__builtins__"} == set(kafkaguard.__all__)


def test_core_api_is_present():
    for name in (
        "StandardAuthorizer",
        "AclBinding",
        "AclBindingFilter",
        "AuthorizerNotReadyError",
        "Decision",
        "validate_new_binding",
    ):
        assert name in kafkaguard.__all__


@pytest.mark.parametrize("package", ["kafkaguard.model", "kafkaguard.authorizer"])
def test_core_subpackage_all_is_exact(package):
    module = importlib.import_module(package)
    exported: list[str] = module.__all__
    assert len(set(exported)) == len(exported)
    assert set(exported) == public_names(module)


def test_top_level_reexports_are_the_subpackage_objects():
    from kafkaguard import authorizer, errors, model

    for name in kafkaguard.__all__:
        if name == "__version__":
            continue
        value = getattr(kafkaguard, name)
        sources = [getattr(m, name, None) for m in (authorizer, errors, model)]
        assert value in sources, name


def test_import_needs_no_optional_extra():
    code = "import json, sys; import kafkaguard; print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    completed = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    loaded = set(json.loads(completed.stdout))
    assert "kafkaguard" in loaded
    assert loaded.isdisjoint(FORBIDDEN), sorted(loaded & FORBIDDEN)
    # -X importtime lists every module imported, nested ones included.
    imported = {line.rsplit("|", 1)[-1].strip().split(".")[0] for line in completed.stderr.splitlines() if "|" in line}
    assert "kafkaguard" in imported
    assert imported.isdisjoint(FORBIDDEN), sorted(imported & FORBIDDEN)
