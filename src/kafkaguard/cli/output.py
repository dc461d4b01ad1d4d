"""What the CLI prints: Kafka's ``toString`` forms (so kafka-acls.sh users and their scripts read the same text) and
one way to end a command with an error."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence
from enum import StrEnum
from typing import NoReturn

import typer
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

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


class TableOutput(StrEnum):
    """``--output`` of a command that prints a table: ``table`` fits the terminal (a table when it fits, else one
    block of ``column  value`` lines per row), ``wide`` one row per line whatever the width, ``json`` for scripts."""

    TABLE = "table"
    WIDE = "wide"
    JSON = "json"


def _natural_width(renderable: Table) -> int:
    """The width ``renderable`` takes when nothing limits it (a measurement on an unbounded console)."""
    unbounded = Console(width=100_000)
    return max(Measurement.get(unbounded, unbounded.options, renderable).maximum, 20)


def print_rows(
    headers: Sequence[str],
    rows: Sequence[Sequence[Text]],
    output: TableOutput,
    *,
    title: str | None = None,
    right: Sequence[str] = (),
) -> None:
    """Print ``rows`` under ``headers`` (cells are ``Text``: never markup). No cell is ever cut with an ellipsis: a
    principal or an address shown in part would mislead. ``table``: a table when its natural width fits the
    terminal, else (80 columns and nine columns do not go together) one block per row, each value beside its
    column's name and folded only where it is longer than the line. ``wide``: the table at its natural width.

    Cost: one measurement of the table (O(cells)) besides printing it."""
    table = Table(title=title)
    for header in headers:
        table.add_column(header, justify="right" if header in right else "left", overflow="fold")
    for row in rows:
        table.add_row(*row)
    if output is TableOutput.WIDE:
        # as wide as the rows need: a terminal narrower than that wraps or scrolls (less -S), nothing is folded
        Console(width=_natural_width(table), soft_wrap=True, highlight=False).print(table)
        return
    console = Console(highlight=False)
    if _natural_width(table) <= console.width:
        console.print(table)
        return
    if title:
        console.print(Text(title, style="bold"))
    label = max(len(h) for h in headers)
    for number, row in enumerate(rows):
        if number:
            console.print()
        block = Table.grid(padding=(0, 2))
        block.add_column(width=label, no_wrap=True, style="dim")
        block.add_column(overflow="fold")
        for header, cell in zip(headers, row, strict=True):
            block.add_row(header, cell)
        console.print(block)


def printable(text: str) -> Text:
    """A cell as plain text: never Rich markup (``[link=…]`` in a name), and every control or format character
    escaped (``\\x1b``, ``\\u202e``) — a refused request's names are any caller's, and an escape sequence in one
    must not reach the terminal of whoever reads the history."""
    return Text("".join(_escaped(char) for char in text))


def _escaped(char: str) -> str:
    if unicodedata.category(char) not in ("Cc", "Cf"):
        return char
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
