"""The envelope: CloudEvents 1.0 attributes in one order, ids fresh, unwrap the reader's inverse."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime

import pytest

from kafkaguard.audit.records.cloudevents import CATEGORY_TYPES, DATASCHEMA, envelope, source_of, to_json, unwrap
from kafkaguard.model.json_value import JsonObject

WHEN = datetime(2025, 3, 14, 9, 26, 53, 104_999, tzinfo=UTC)


def test_an_envelope_has_the_published_fields_in_order():
    made = envelope("authorization", "TOPIC:payments", {"decision": "DENIED"}, source="kafkaguard://n1", time=WHEN)
    assert list(made) == ["specversion", "id", "source", "type", "time", "subject", "datacontenttype", "dataschema",
                          "data"]  # fmt: skip
    assert made["specversion"] == "1.0"
    assert made["type"] == "io.kafkaguard.authorization.v2"
    assert made["time"] == "2025-03-14T09:26:53.104Z"
    assert made["subject"] == "TOPIC:payments"
    assert made["dataschema"] == DATASCHEMA
    made_id = made["id"]
    assert isinstance(made_id, str)
    assert uuid.UUID(hex=made_id).version == 4
    assert to_json(made).startswith('{"specversion":"1.0","id":')


def test_ids_are_fresh_unless_given():
    ids = {envelope("management", "s", {}, source="kafkaguard://n", time=WHEN)["id"] for _ in range(100)}
    assert len(ids) == 100
    assert envelope("management", "s", {}, source="kafkaguard://n", time=WHEN, id="fixed")["id"] == "fixed"


@pytest.mark.parametrize("category", list(CATEGORY_TYPES))
def test_unwrap_gives_back_category_and_data(category: str):
    data: JsonObject = {"result": "SUCCESS", "nested": {"a": [1, 2]}}
    line = to_json(envelope(category, "User:bob", data, source=source_of("n1"), time=WHEN))
    assert unwrap(json.loads(line)) == (category, data)


def test_unwrap_refuses_what_is_not_an_envelope():
    v1 = {"version": 1, "time": "2025-03-14T09:26:53.104Z", "principal": "User:a"}
    assert unwrap(v1) is None
    assert unwrap([1]) is None
    assert unwrap({"specversion": "1.0", "type": "io.kafkaguard.authorization.v2", "data": "not an object"}) is None


def test_unwrap_names_an_unknown_kafkaguard_category_so_readers_can_skip_it():
    assert unwrap({"specversion": "1.0", "type": "io.kafkaguard.billing.v3", "data": {}}) == ("billing", {})
    assert unwrap({"specversion": "1.0", "type": "com.example.other", "data": {}}) == ("com.example.other", {})


def test_an_unknown_category_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match="authorization, management, authentication, shadow"):
        envelope("billing", "s", {}, source="kafkaguard://n", time=WHEN)


def test_the_source_defaults_to_the_host_name():
    assert source_of("node-7") == "kafkaguard://node-7"
    assert source_of(None).startswith("kafkaguard://") and len(source_of(None)) > len("kafkaguard://")
