"""Kafka Uuids: the string form, and random ids that are never reserved nor start with '-'."""

from __future__ import annotations

import uuid

import pytest

from kafkaguard.store import METADATA_TOPIC_ID, ZERO_UUID, new_cluster_id, random_uuid, uuid_to_string


def test_the_string_form_is_kafkas() -> None:
    # Kafka's Uuid.METADATA_TOPIC_ID prints as "AAAAAAAAAAAAAAAAAAAAAQ" (UuidTest / kafka-storage output).
    assert uuid_to_string(METADATA_TOPIC_ID) == "AAAAAAAAAAAAAAAAAAAAAQ"
    assert uuid_to_string(ZERO_UUID) == "AAAAAAAAAAAAAAAAAAAAAA"
    assert uuid_to_string(uuid.UUID(bytes=b"\xff" * 16)) == "_____________________w"


def test_random_ids_skip_reserved_and_dash_first(monkeypatch: pytest.MonkeyPatch) -> None:
    dash_first = uuid.UUID(bytes=b"\xf8" + b"\x00" * 15)
    assert uuid_to_string(dash_first).startswith("-")
    good = uuid.UUID(int=12345)
    drawn = iter([ZERO_UUID, METADATA_TOPIC_ID, dash_first, good])
    monkeypatch.setattr(uuid, "uuid4", lambda: next(drawn))
    assert random_uuid() == good


def test_fresh_ids_differ() -> None:
    assert len({random_uuid() for _ in range(1000)}) == 1000
    assert len({new_cluster_id() for _ in range(100)}) == 100
