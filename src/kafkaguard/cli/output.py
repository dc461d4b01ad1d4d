"""What the CLI prints: Kafka's ``toString`` forms (so kafka-acls.sh users and their scripts read the same text) and
one way to end a command with an error."""

from __future__ import annotations

from collections.abc import Iterable
from typing import NoReturn

import typer

from kafkaguard.model import AccessControlEntry, AclBinding, ResourcePattern, ResourcePatternFilter


def pattern_text(pattern: ResourcePattern) -> str:
    """Java ``ResourcePattern.toString()``."""
    return (
        f"ResourcePattern(resourceType={pattern.resource_type}, name={pattern.name}, "
        f"patternType={pattern.pattern_type})"
    )


def pattern_filter_text(pattern_filter: ResourcePatternFilter) -> str:
    """Java ``ResourcePatternFilter.toString()``."""
    name = "<any>" if pattern_filter.name is None else pattern_filter.name
    return (
        f"ResourcePatternFilter(resourceType={pattern_filter.resource_type}, name={name}, "
        f"patternType={pattern_filter.pattern_type})"
    )


def entry_text(entry: AccessControlEntry) -> str:
    """Java ``AccessControlEntry.toString()``."""
    return (
        f"(principal={entry.principal}, host={entry.host}, operation={entry.operation}, "
        f"permissionType={entry.permission_type})"
    )


def binding_text(binding: AclBinding) -> str:
    """Java ``AclBinding.toString()``."""
    return f"(pattern={pattern_text(binding.pattern)}, entry={entry_text(binding.entry)})"


def _entry_key(entry: AccessControlEntry) -> tuple[str, str, int, int]:
    return entry.principal, entry.host, entry.operation.code, entry.permission_type.code


def _pattern_key(pattern: ResourcePattern) -> tuple[int, str, int]:
    return pattern.resource_type.code, pattern.name, pattern.pattern_type.code


def group_by_pattern(bindings: Iterable[AclBinding]) -> list[tuple[ResourcePattern, list[AccessControlEntry]]]:
    """Bindings grouped by resource pattern, patterns and entries in a stable order (Kafka's are hash order)."""
    groups: dict[ResourcePattern, set[AccessControlEntry]] = {}
    for binding in bindings:
        groups.setdefault(binding.pattern, set()).add(binding.entry)
    return [(p, sorted(groups[p], key=_entry_key)) for p in sorted(groups, key=_pattern_key)]


def current_acls_text(bindings: Iterable[AclBinding]) -> str:
    """kafka-acls.sh ``--list`` output (``AclCommand.printResourceAcls``, Kafka 3.9+/4.x): per resource,

    ``Current ACLs for resource `<pattern>`:`` NL, the entries each behind a TAB joined by NL, NL, and println's NL.
    """
    return "".join(
        f"Current ACLs for resource `{pattern_text(pattern)}`:\n"
        + "\n".join(f"\t{entry_text(e)}" for e in entries)
        + "\n\n"
        for pattern, entries in group_by_pattern(bindings)
    )


def adding_acls_text(pattern: ResourcePattern, entries: Iterable[AccessControlEntry]) -> str:
    """kafka-acls.sh ``--add`` output for one resource (``AclCommand.addAcls``)."""
    return (
        f"Adding ACLs for resource `{pattern_text(pattern)}`: \n "
        + "\n".join(f"\t{entry_text(e)}" for e in sorted(entries, key=_entry_key))
        + "\n\n"
    )


def fail(message: str, exit_code: int = 1) -> NoReturn:
    """Print ``error: <message>`` on stderr (red on a terminal) and exit with ``exit_code``."""
    typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
    raise typer.Exit(code=exit_code)


def warn(message: str) -> None:
    typer.secho(f"warning: {message}", fg=typer.colors.YELLOW, err=True)
