"""The audit event envelope: CloudEvents 1.0 in structured JSON mode, one object per line, whatever the sink.

Every audit sink (the JSON lines file, a Kafka topic) writes the same envelope (``docs/audit-event.schema.json``)::

    {"specversion":"1.0","id":"5f0c…","source":"kafkaguard://node-1","type":"io.kafkaguard.authorization.v2",
     "time":"2025-03-14T09:26:53.104Z","subject":"TOPIC:payments","datacontenttype":"application/json",
     "dataschema":"https://kafkaguard.dev/schemas/audit/v2.json","data":{…}}

The fields are always written in that order (a reader that diffs two files, or a test, sees one layout). ``type``
names the category (``CATEGORY_TYPES``): the word routing rules match on. ``subject`` is what the event is about:
``RESOURCE_TYPE:name`` for an authorization, what changed for a management event, the principal (or the name a
client claimed) for an authentication. ``id`` is a fresh uuid4 (hex): two envelopes of the same event written twice
(a resend after a crash) carry the same id, so a reader can drop the duplicate.

``unwrap`` is the reader's side: (category, data) of an envelope, None for anything else — v1 flat records of older
files have no ``specversion`` and are read as they always were. Standard library only.
"""

from __future__ import annotations

import json
import re
import socket
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime

from kafkaguard.model.json_value import JsonObject, JsonValue

SPECVERSION = "1.0"
DATACONTENTTYPE = "application/json"
#: The published schema of every envelope and data shape (``docs/audit-event.schema.json``, whose ``$id`` it is).
DATASCHEMA = "https://kafkaguard.dev/schemas/audit/v2.json"

AUTHORIZATION = "authorization"
MANAGEMENT = "management"
AUTHENTICATION = "authentication"
SHADOW = "shadow"
#: The broker's own refusal of a request kafkaguard allowed (passthrough: ``audit.records.broker_refusals``).
BROKER = "broker"

#: The CloudEvents ``type`` of each category.
CATEGORY_TYPES: Mapping[str, str] = {
    AUTHORIZATION: "io.kafkaguard.authorization.v2",
    MANAGEMENT: "io.kafkaguard.management.v1",
    AUTHENTICATION: "io.kafkaguard.authentication.v1",
    SHADOW: "io.kafkaguard.shadow.v1",
    BROKER: "io.kafkaguard.broker.v1",
}
CATEGORIES = tuple(CATEGORY_TYPES)
_TYPE_CATEGORIES = {type_: category for category, type_ in CATEGORY_TYPES.items()}
#: Any kafkaguard type, also of a version or category this code does not know (read as that category).
_KAFKAGUARD_TYPE = re.compile(r"^io\.kafkaguard\.([a-z_]+)\.v\d+$")


def source_of(node: str | None = None) -> str:
    """``kafkaguard://<node>``: the node's configured name, else this host's name."""
    return f"kafkaguard://{node or socket.gethostname()}"


def event_time(time: datetime | str) -> str:
    """ISO 8601 in UTC with milliseconds and ``Z`` (``2025-03-14T09:26:53.104Z``); a string is taken as written."""
    if isinstance(time, str):
        return time
    moment = time.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def envelope(
    category: str,
    subject: str,
    data: Mapping[str, JsonValue],
    *,
    source: str,
    time: datetime | str,
    id: str | None = None,  # the CloudEvents attribute's name
) -> JsonObject:
    """The envelope of one event, its fields in the published order.

    :raises ValueError: ``category`` is not one of ``CATEGORIES``.
    """
    try:
        type_ = CATEGORY_TYPES[category]
    except KeyError:
        raise ValueError(f"unknown audit event category {category!r}; known: {', '.join(CATEGORIES)}") from None
    return {
        "specversion": SPECVERSION,
        "id": id if id is not None else uuid.uuid4().hex,
        "source": source,
        "type": type_,
        "time": event_time(time),
        "subject": subject,
        "datacontenttype": DATACONTENTTYPE,
        "dataschema": DATASCHEMA,
        "data": dict(data),
    }


def unwrap(obj: object) -> tuple[str, JsonObject] | None:
    """(category, data) of an envelope; None when ``obj`` is not one (a v1 flat record, anything else).

    A kafkaguard type of a category this code does not know yet gives that category's word (``io.kafkaguard.x.v3``
    → ``x``), so a reader can skip it by name; another producer's type gives the type itself.
    """
    if not isinstance(obj, dict) or "specversion" not in obj:
        return None
    type_, data = obj.get("type"), obj.get("data")
    if not isinstance(type_, str) or not isinstance(data, dict):
        return None
    category = _TYPE_CATEGORIES.get(type_)
    if category is None:
        found = _KAFKAGUARD_TYPE.match(type_)
        category = found.group(1) if found else type_
    return category, data


def to_json(event: Mapping[str, JsonValue]) -> str:
    """One line of JSON (compact, UTF-8 as is), without the newline."""
    return json.dumps(event, ensure_ascii=False, separators=(",", ":"))
