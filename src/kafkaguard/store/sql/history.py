"""The ``management_events`` table: the management history (``HistoryStore``) on either SQL database.

A write method of a table set calls ``written(tx, history, outcome)`` inside its own transaction, so an event is
committed with the change it describes or not at all. Rows are only appended; ``seq`` (the database's own
auto-increment) orders them, newest first on read. A query narrows in SQL on indexed columns and returns at most
``limit`` rows, so reading the last few events of a principal is a few index reads however long the history is.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, LiteralString, TypeVar

from kafkaguard.model import Actor, HistoryQuery, ManagementEvent
from kafkaguard.model.management import event_time
from kafkaguard.store.ports import History
from kafkaguard.store.sql.transaction import Database, Row, Transaction

_R = TypeVar("_R")

_INSERT = (
    "INSERT INTO management_events (occurred_at, action, actor_principal, actor_address, actor_interface, "
    "request_id, principal, resource_type, resource_name, subject, result, data) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_SELECT = (
    "SELECT seq, occurred_at, action, actor_principal, actor_address, actor_interface, request_id, principal, "
    "resource_type, resource_name, subject, result, data FROM management_events"
)
#: The columns of the common fields, which ``data`` repeats: the rest of ``data`` is the event's details.
_COMMON = frozenset({"version", "action", "actor", "result", "error_message"})


class HistoryTable:
    """``HistoryStore`` on ``db``."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def record_events(self, events: Sequence[ManagementEvent]) -> None:
        if events:
            with self._db.write() as tx:
                _insert(tx, events)

    def read_history(self, query: HistoryQuery) -> list[ManagementEvent]:
        where: list[LiteralString] = []
        params: list[object] = []
        if query.principal is not None:
            where.append("(principal = ? OR actor_principal = ?)")
            params += [query.principal, query.principal]
        if query.resource_type is not None:
            where.append("resource_type = ?")
            params.append(query.resource_type)
        if query.resource_name is not None:
            where.append("resource_name = ?")
            params.append(query.resource_name)
        if query.action is not None:
            # A prefix: LIKE with its wildcards escaped (a range would depend on the database's collation).
            where.append("action LIKE ? ESCAPE '!'")
            params.append(query.action.replace("!", "!!").replace("%", "!%").replace("_", "!_") + "%")
        if query.since is not None:
            where.append("occurred_at >= ?")
            params.append(event_time(query.since))
        sql: LiteralString = _SELECT + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY seq DESC LIMIT ?"
        params.append(query.limit)
        with self._db.read() as tx:
            rows = tx.all(sql, params)
            document_value = tx.dialect.document_value
        return [_event(row, document_value(row[12])) for row in rows]


def written(tx: Transaction, history: History[_R] | None, outcome: _R) -> _R:
    """``outcome``, after storing the events ``history`` makes of it in ``tx`` (the change's own transaction)."""
    if history is not None:
        _insert(tx, history(outcome))
    return outcome


def _insert(tx: Transaction, events: Sequence[ManagementEvent]) -> None:
    tx.run_many(_INSERT, [_row(tx, event) for event in events])


def _row(tx: Transaction, event: ManagementEvent) -> tuple[object, ...]:
    actor = event.actor
    return (
        event_time(event.time),
        event.action,
        actor.principal,
        actor.address,
        actor.interface,
        actor.request_id,
        event.principal,
        event.resource_type,
        event.resource_name,
        event.subject,
        event.result,
        tx.dialect.document_param(event.data()),
    )


def _event(row: Row, data: dict[str, Any]) -> ManagementEvent:
    return ManagementEvent(
        seq=int(row[0]),
        time=datetime.fromisoformat(str(row[1])),
        action=str(row[2]),
        actor=Actor(principal=str(row[3]), address=row[4], interface=str(row[5]), request_id=row[6]),
        principal=row[7],
        resource_type=row[8],
        resource_name=row[9],
        subject=str(row[10]),
        result=str(row[11]),
        error_message=data.get("error_message"),
        details={key: value for key, value in data.items() if key not in _COMMON},
    )
