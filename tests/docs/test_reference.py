"""The generated reference pages against the code they describe, read back from the Markdown as a reader sees it:
the settings page has one row per field of ``Settings`` and no other, each with its variable and, where the
long-running commands have one, its flag; the CLI page has a section per Typer command with every option and
argument; the metrics page names every family the console's ``/metrics`` exposes; the APIs page every API offered."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import typer

from kafkaguard.bootstrap import build_services
from kafkaguard.cli.main import app
from kafkaguard.config import Settings, load_settings
from kafkaguard.console.app import create_app
from kafkaguard.proxy.versions import CAPS, LOCAL
from kafkaguard.server.versions import SERVER_VERSIONS
from tests.docs.test_site import reference_module


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    out = tmp_path_factory.mktemp("reference")
    return {path.name: path.read_text("utf-8") for path in reference_module().write(out)}


def rows(page: str) -> list[list[str]]:
    """The cells of every table row of ``page`` (not the header or its rule)."""
    found = []
    for line in page.splitlines():
        if line.startswith("| ") and not line.startswith("|---"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
            found.append(cells)
    return [r for r in found if r[0] not in {"YAML key", "option", "argument", "metric", "API", "field", "feature"}]


def test_the_settings_page_has_every_setting_and_nothing_else(pages: dict[str, str]) -> None:
    table = rows(pages["settings.md"])
    keys = [row[0].strip("`") for row in table]
    assert len(keys) == len(set(keys)), "a setting is listed twice"
    assert sorted(keys) == sorted(Settings.model_fields)
    for row in table:
        key = row[0].strip("`")
        assert row[2].startswith(f"`KAFKAGUARD_{key.upper()}`"), row


def _options(command: Any) -> list[Any]:
    return [p for p in command.params if p.param_type_name == "option" and not p.hidden]


def test_every_flag_of_serve_proxy_and_console_is_a_settings_row_or_says_why_not(pages: dict[str, str]) -> None:
    flags_by_key = {row[0].strip("`"): row[1] for row in rows(pages["settings.md"])}
    root: Any = typer.main.get_command(app)  # a group: its .commands are the subcommands
    missing = []
    for name in ("serve", "proxy", "console"):
        for option in _options(root.commands[name]):
            if option.name in {"config", "log_level"} and option.name not in flags_by_key:
                continue
            key = "listeners" if option.name == "listener" else option.name
            if key not in flags_by_key or f"`{option.opts[0]}`" not in flags_by_key[key]:
                missing.append(f"{name} {option.opts[0]}")
    assert missing == [], f"flags not in the settings reference: {missing}"


def _commands(command: Any, path: tuple[str, ...]) -> list[tuple[tuple[str, ...], Any]]:
    found = [(path, command)]
    for name, sub in getattr(command, "commands", {}).items():
        found += _commands(sub, (*path, name))
    return found


def test_the_cli_page_has_every_command_option_and_argument(pages: dict[str, str]) -> None:
    page = pages["cli.md"]
    sections = dict(re.findall(r"^## `([^`]+)`\n(.*?)(?=^## |\Z)", page, re.S | re.M))
    commands = _commands(typer.main.get_command(app), ("kafkaguard",))[1:]
    assert sorted(sections) == sorted(" ".join(path) for path, _ in commands)
    missing = []
    for path, command in commands:
        section = sections[" ".join(path)]
        if command.help:
            assert command.help.strip().split("\n")[0] in section, path
        for parameter in command.params:
            if getattr(parameter, "hidden", False):
                continue
            shown = parameter.opts[0] if parameter.param_type_name == "option" else parameter.name.upper()
            if f"`{shown}`" not in section:
                missing.append(f"{' '.join(path)} {shown}")
    assert missing == [], f"not in the CLI reference: {missing}"


def test_the_metrics_page_names_every_family_of_metrics(pages: dict[str, str], tmp_path: Path) -> None:
    services = build_services(load_settings(data_dir=tmp_path))
    try:
        exposition = create_app(services).state.console.metrics.render().decode()
    finally:
        services.close()
    families = dict(re.findall(r"^# TYPE (\S+) (\S+)$", exposition, re.M))
    documented = {row[0].strip("`"): row[1] for row in rows(pages["metrics.md"])}
    for family, kind in families.items():
        if family.endswith("_created"):
            continue  # prometheus-client's own series: when each counter and histogram was created
        name = family + "_total" if kind == "counter" and not family.endswith("_total") else family
        assert documented.get(name) == kind, (name, kind)
    assert len(families) >= 15


def test_the_apis_page_has_every_api_offered(pages: dict[str, str]) -> None:
    keys = {int(row[1]) for row in rows(pages["apis.md"]) if row[1].isdigit()}
    assert keys == {int(key) for key in set(SERVER_VERSIONS) | set(LOCAL) | set(CAPS)}


def test_every_setting_and_option_says_what_it_is(pages: dict[str, str]) -> None:
    """A setting or option added without a description would be an empty cell in the reference."""
    assert [row[0] for row in rows(pages["settings.md"]) if not row[4]] == []
    silent = [
        f"{' '.join(path)} {parameter.opts[0]}"
        for path, command in _commands(typer.main.get_command(app), ("kafkaguard",))
        for parameter in _options(command)
        if not parameter.help
    ]
    assert silent == [], f"options without help: {silent}"
