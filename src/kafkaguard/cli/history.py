"""``kafkaguard acls history``: who changed what, from the store's management history (any node of a shared
PostgreSQL store sees every node's changes), newest first.

Answers "who gave bob access to pii-orders, and when": ``kafkaguard acls history --principal User:bob --resource
pii-orders``. Every door writes the same events (Kafka's CreateAcls/DeleteAcls, the console's REST API, ``users``,
``groups``, ``store migrate``), refused attempts included — those refused by authorization too (``service.refused``),
a refused deletion shown by its filter and a request's refused items beyond the first few by one summary row;
``--action`` narrows to a kind (``acl.``, ``scram.``).
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.text import Text

from kafkaguard.bootstrap import open_store
from kafkaguard.cli.output import TableOutput, fail, print_rows, printable
from kafkaguard.config import load_settings
from kafkaguard.config.sections import StoreSettings
from kafkaguard.errors import KafkaguardError
from kafkaguard.model import HistoryQuery, ManagementEvent
from kafkaguard.model.management import event_time
from kafkaguard.service.events import describe_item

_RELATIVE = re.compile(r"^(\d+)([mhd])$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days"}


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """``--since``: a duration back from now (``90m``, ``24h``, ``7d``) or an ISO date or time (UTC unless it
    names an offset).

    :raises ValueError: neither, with what to write instead.
    """
    match = _RELATIVE.match(text.strip())
    if match is not None:
        return (now or datetime.now(UTC)) - timedelta(**{_UNITS[match[2]]: int(match[1])})
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"--since {text!r}: give a duration (90m, 24h, 7d) or an ISO date or time (2025-03-14, "
            "2025-03-14T09:00:00Z)"
        ) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def history(
    principal: Annotated[
        str | None,
        typer.Option(help="The principal concerned (the ACL's principal, the SCRAM user, the member) or the actor."),
    ] = None,
    resource_type: Annotated[str | None, typer.Option(help="TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID ...")] = None,
    resource: Annotated[str | None, typer.Option(help="The resource name (an ACL's or a topic's).")] = None,
    action: Annotated[str | None, typer.Option(help="An action or its prefix: acl., acl.created, scram. ...")] = None,
    since: Annotated[str | None, typer.Option(help="Only since then: 90m, 24h, 7d, or an ISO date/time.")] = None,
    limit: Annotated[int, typer.Option(min=1, help="At most this many events (the newest).")] = 50,
    output: Annotated[
        TableOutput,
        typer.Option(
            help="table (fits the terminal: one block per event when the table does not), wide (one line per "
            "event), or json (one event's data per line)."
        ),
    ] = TableOutput.TABLE,
    data_dir: Annotated[Path | None, typer.Option(help="Data directory of the server. Default: ./data")] = None,
    config: Annotated[Path | None, typer.Option(help="YAML config file (data_dir, store).")] = None,
) -> None:
    """Who changed ACLs, SCRAM users, groups, quotas and topics: when, from where, through which door, and the
    result; newest first, from the store (every node of a shared store sees every node's changes)."""
    try:
        query = HistoryQuery(
            principal=principal,
            resource_type=resource_type.upper() if resource_type else None,
            resource_name=resource,
            action=action,
            since=parse_since(since) if since is not None else None,
            limit=limit,
        )
    except ValueError as e:
        fail(str(e), 2)
    try:
        store = open_store(StoreSettings.of(load_settings(config, data_dir=data_dir)))
    except KafkaguardError as e:
        fail(str(e), 2)
    try:
        events = store.read_history(query)
    except KafkaguardError as e:
        fail(str(e), 2)
    finally:
        store.close()
    if output is TableOutput.JSON:
        for event in events:
            typer.echo(
                json.dumps(
                    {"seq": event.seq, "time": event_time(event.time), "subject": event.subject, "data": event.data()}
                )
            )
        return
    if not events:
        Console(soft_wrap=True, highlight=False).print("No management events match.")
        return
    print_rows(HEADERS, history_rows(events), output)


HEADERS = ("time (UTC)", "action", "actor", "from", "via", "what", "result")


def history_rows(events: list[ManagementEvent]) -> list[tuple[Text, ...]]:
    rows = []
    for event in events:
        actor = event.actor
        via = actor.interface + (f" ({actor.request_id})" if actor.request_id else "")
        result = event.result if event.succeeded else f"{event.result}: {event.error_message or ''}"
        cells = (
            event.time.strftime("%Y-%m-%d %H:%M:%S"),
            event.action,
            actor.principal,
            actor.address or "-",
            via,
            describe_item(event),
            result,
        )
        rows.append(tuple(printable(cell) for cell in cells))
    return rows
