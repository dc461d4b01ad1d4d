"""``kafkaguard audit shadow-report LOG...``: what a candidate ACL set would change, from a day of live evidence.

Reads audit log files (JSON lines: v1/v2 authorization records, CloudEvents envelopes; ``.gz`` too) and summarises
the shadow events (``audit.records.shadow``) per principal, resource and direction: "newly denied" is what applying the
candidate set would break, "newly allowed" what it would open up. Other records are skipped; lines that are not
JSON, or shadow events that lack a field, are counted and reported (never silently). Runs locally, without Spark:
shadow events are few (one per flipped decision), the rest of a line is skipped after one JSON decode.

A permissive proxy's would-be denials (authorization records with ``"enforced": false``) are not shadow events: the
report counts them apart and says where to read them (``kafkaguard explain --from-audit``), so that a permissive log
without a candidate set never reads as "the candidate decides this traffic alike". They are found by the text
``"enforced"`` first, so the other lines still cost no decode.

Exit code 0 when the report was made (with or without flips), 1 when a file cannot be read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.text import Text

from kafkaguard.audit.records.cloudevents import AUTHORIZATION, unwrap
from kafkaguard.audit.records.shadow import FlipSummary, ShadowFlip, shadow_of, summarise
from kafkaguard.cli.log_lines import log_lines
from kafkaguard.cli.output import TableOutput, fail, print_rows, printable


class _Read:
    def __init__(self) -> None:
        self.lines = 0
        self.flips: list[ShadowFlip] = []
        self.bad: list[str] = []
        #: A permissive proxy's would-be denials per principal: (records, requests).
        self.would_be_denials: dict[str, tuple[int, int]] = {}

    def would_be_denied(self, principal: str | None) -> tuple[int, int]:
        """(records, requests) of the would-be denials, of ``principal`` only when given."""
        counts = [c for p, c in self.would_be_denials.items() if principal is None or p == principal]
        return sum(records for records, _ in counts), sum(requests for _, requests in counts)


def _would_be_denial(obj: object) -> tuple[str, int] | None:
    """(principal, requests) of a permissive proxy's would-be denial (a v2 record or its envelope); None otherwise."""
    unwrapped = unwrap(obj)
    data = unwrapped[1] if unwrapped is not None and unwrapped[0] == AUTHORIZATION else obj
    if not isinstance(data, dict) or data.get("enforced") is not False or data.get("decision") != "DENIED":
        return None
    principal, count = data.get("principal"), data.get("count", 1)
    if not isinstance(principal, str) or not isinstance(count, int) or isinstance(count, bool):
        return None
    return principal, count


def read_flips(paths: list[Path]) -> _Read:
    read = _Read()
    for source, number, line in log_lines(paths):
        if not line.strip():
            continue
        read.lines += 1
        shadow = '"shadow' in line
        if not shadow and '"enforced"' not in line:  # most lines: no decode needed to know they are neither
            continue
        try:
            decoded = json.loads(line)
        except ValueError:
            read.bad.append(f"{source}:{number}: not valid JSON")
            continue
        if not shadow:
            denial = _would_be_denial(decoded)
            if denial is not None:
                records, requests = read.would_be_denials.get(denial[0], (0, 0))
                read.would_be_denials[denial[0]] = (records + 1, requests + denial[1])
            continue
        found = shadow_of(decoded)
        if isinstance(found, str):
            read.bad.append(f"{source}:{number}: {found}")
        elif found is not None:
            read.flips.append(found)
    return read


def shadow_report(
    logs: Annotated[list[Path], typer.Argument(help="Audit log files (JSON lines; .gz too).", metavar="LOG...")],
    output: Annotated[
        str,
        typer.Option(
            "--output",
            "-o",
            help="table (default: fits the terminal, one block per flip when the table does not), wide (one line "
            "per flip) or json.",
        ),
    ] = "table",
    principal: Annotated[str | None, typer.Option(help="Only this principal's flips, e.g. User:alice.")] = None,
) -> None:
    """Summarise shadow ACL flips per principal, resource and direction (newly denied / newly allowed)."""
    if output not in {o.value for o in TableOutput}:
        fail(f"--output {output!r}: expected table, wide or json", exit_code=2)
    read = read_flips(logs)
    flips = [f for f in read.flips if principal is None or f.principal == principal]
    summaries = summarise(flips)
    if output == "json":
        typer.echo(
            json.dumps(
                {
                    "lines_read": read.lines,
                    "shadow_events": len(flips),
                    "requests": sum(f.count for f in flips),
                    "bad_lines": len(read.bad),
                    "flips": [s.to_json() for s in summaries],
                    "would_be_denials": dict(
                        zip(("records", "requests"), read.would_be_denied(principal), strict=True)
                    ),
                },
                indent=2,
            )
        )
    else:
        records, requests = read.would_be_denied(principal)
        _print_table(summaries, read, len(flips), TableOutput(output), permissive=records > 0)
        if records:
            Console().print(
                f"{records} record(s) of a permissive proxy's would-be denials ({requests} request(s), "
                '"enforced": false) are not shadow flips: kafkaguard explain --from-audit LOG explains them.'
            )
    for reason in read.bad[:10]:
        typer.secho(f"warning: {reason}", fg=typer.colors.YELLOW, err=True)
    if len(read.bad) > 10:
        typer.secho(f"warning: {len(read.bad) - 10} more bad line(s)", fg=typer.colors.YELLOW, err=True)


def _print_table(
    summaries: list[FlipSummary], read: _Read, events: int, output: TableOutput, *, permissive: bool
) -> None:
    if not summaries:
        # A permissive proxy's log may hold no candidate's events at all: then "alike" would be no finding.
        alike = "." if permissive else ": the candidate ACL set decides this traffic alike."
        Console().print(f"No shadow flips in {read.lines} record(s){alike}")
        return
    headers = (
        "Direction",
        "Principal",
        "Resource",
        "Operations",
        "Requests",
        "Hosts",
        "First seen",
        "Last seen",
        "Candidate rule",
    )
    rows = [
        (
            Text(s.direction, style="red" if s.direction == "newly denied" else "green"),
            printable(s.principal),
            printable(f"{s.resource_type}:{s.resource_name}"),
            Text(", ".join(s.operations)),
            Text(str(s.requests)),
            printable(", ".join(s.hosts)),
            Text(s.first_seen),
            Text(s.last_seen),
            printable("\n".join(s.shadow_rules)),
        )
        for s in summaries
    ]
    title = f"Shadow ACL flips: {events} event(s) in {read.lines} record(s)"
    print_rows(headers, rows, output, title=title, right=("Requests",))
