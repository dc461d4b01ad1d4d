"""``kafkaguard export``: the cluster's ACLs as the YAML file ``plan``/``apply`` read (or as the ACL JSON format).
Exporting and then planning the export shows no change."""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from kafkaguard.cli.aclfile import dump_yaml
from kafkaguard.cli.client import DEFAULT_TIMEOUT, CliError
from kafkaguard.cli.connection import BootstrapServer, CommandConfig, Timeout, connect
from kafkaguard.cli.output import fail
from kafkaguard.cli.plan import read_cluster, sort_key
from kafkaguard.model.acl_json import acls_to_document


class ExportFormat(StrEnum):
    yaml = "yaml"
    json = "json"


def export(
    bootstrap_server: BootstrapServer,
    command_config: CommandConfig = None,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Write to this file (default: stdout).")] = None,
    format_: Annotated[
        ExportFormat, typer.Option("--format", help="yaml (for plan/apply) or json.")
    ] = ExportFormat.yaml,
    timeout: Timeout = DEFAULT_TIMEOUT,
) -> None:
    """Write the cluster's ACLs as an ACL file (kafkaguard's YAML by default)."""
    try:
        bindings = sorted(read_cluster(connect(bootstrap_server, command_config, timeout)), key=sort_key)
    except CliError as e:
        fail(str(e), e.exit_code)
    text = (
        dump_yaml(bindings) if format_ is ExportFormat.yaml else json.dumps(acls_to_document(bindings), indent=2) + "\n"
    )
    if output is None:
        typer.echo(text, nl=False)
        return
    try:
        output.write_text(text, "utf-8")
    except OSError as e:
        fail(f"cannot write {output}: {e.strerror or e}", 2)
    typer.echo(f"Exported {len(bindings)} ACL(s) to {output}", err=True)
