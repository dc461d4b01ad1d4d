"""The type of a JSON document: what ``json.dumps`` writes and ``json.loads`` reads back.

One recursive alias for every value that is a JSON document (audit records and their CloudEvents envelopes, ACL JSON,
collected audit rows), so that a signature says "JSON" instead of ``Any``. ``json.loads`` itself returns ``Any``: a
module that parses JSON keeps that one boundary and narrows with ``isinstance`` before reading a field.
"""

from __future__ import annotations

from typing import TypeAlias

JsonValue: TypeAlias = "bool | int | float | str | list[JsonValue] | dict[str, JsonValue] | None"
#: A JSON object: the shape of an audit record, an event's ``data`` and an ACL row.
JsonObject: TypeAlias = "dict[str, JsonValue]"
