"""``service.refused``: the bounds on recording changes refused by authorization, with an injected clock — the first
``per_request`` items of a request and a summary, a token bucket per principal (partial requests, refill, the
empty bucket counted and logged once an interval), texts and maps cut, full buckets forgotten; and ``EventRelay``
keeping what was published before a listener connected (the bootstrap admin's creation)."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path

import jsonschema_rs
import pytest

from kafkaguard.model import Actor, HistoryQuery, ItemError, KafkaErrorCode, ManagementEvent
from kafkaguard.model.acl_json import FIELDS
from kafkaguard.service.credentials import mechanism_name
from kafkaguard.service.events import (
    MANAGEMENT,
    EventRelay,
    acl_fields_event,
    acl_filter_event,
    quota_entity_event,
    scram_event,
    topic_event,
)
from kafkaguard.service.refused import (
    MAX_ENTRIES,
    MAX_TEXT,
    RATE_LIMITED,
    RECORDED,
    SUMMARIZED,
    RefusalLimits,
    RefusedChanges,
    bounded,
    summary_event,
)
from kafkaguard.store import MemoryAclStore

MALLORY = Actor(principal="User:mallory", address="10.0.0.66", interface="kafka:SASL_SSL", request_id="tool/7")
DENIED = ItemError(KafkaErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def topic(name: str) -> ManagementEvent:
    return topic_event("topic.created", MALLORY, name, None, DENIED)


def recorder(limits: RefusalLimits, clock: Clock) -> tuple[RefusedChanges, MemoryAclStore, list[Mapping[str, object]]]:
    store, seen = MemoryAclStore(), []
    relay = EventRelay(lambda _category, _subject, data: seen.append(data))
    return RefusedChanges(store, relay, limits, clock=clock), store, seen


def record(refused: RefusedChanges, names: list[str], actor: Actor = MALLORY) -> list[ManagementEvent]:
    events = refused.events_for(actor, "CreateTopics", names, lambda name: topic_event(
        "topic.created", actor, name, None, DENIED))  # fmt: skip
    refused.record(events)
    return events


def test_a_request_records_its_first_items_and_a_summary_of_the_rest() -> None:
    refused, store, seen = recorder(RefusalLimits(per_request=3, burst=100, per_minute=1), Clock())
    made: list[str] = []

    def event_of(name: str) -> ManagementEvent:
        made.append(name)
        return topic(name)

    events = refused.events_for(MALLORY, "CreateTopics", [f"t{i}" for i in range(10_000)], event_of)
    refused.record(events)
    assert made == ["t0", "t1", "t2", "t3"]  # three events, and the first unrecorded one for the summary's fields
    stored = list(reversed(store.read_history(HistoryQuery(limit=100))))
    assert [e.subject for e in stored] == ["TOPIC:t0", "TOPIC:t1", "TOPIC:t2", "CreateTopics"]
    summary = stored[-1]
    assert dict(summary.details) == {"summary": {"request": "CreateTopics", "items": 10_000, "recorded": 3,
                                                 "not_recorded": 9_997}}  # fmt: skip
    assert (summary.action, summary.actor, summary.result, summary.error_message) == (
        "topic.created", MALLORY, "TOPIC_AUTHORIZATION_FAILED", "Authorization failed.")  # fmt: skip
    assert [data["result"] for data in seen] == ["TOPIC_AUTHORIZATION_FAILED"] * 4  # the audit trail has them too
    assert refused.counts() == {RECORDED: 3, SUMMARIZED: 9_997, RATE_LIMITED: 0}


def test_a_request_within_the_bound_has_no_summary_and_an_empty_one_records_nothing() -> None:
    refused, store, _seen = recorder(RefusalLimits(per_request=3, burst=100, per_minute=1), Clock())
    assert [e.subject for e in record(refused, ["a", "b", "c"])] == ["TOPIC:a", "TOPIC:b", "TOPIC:c"]
    assert record(refused, []) == []
    assert len(store.read_history(HistoryQuery())) == 3


def test_the_principals_bucket_bounds_its_events_and_refills(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    refused, _store, _seen = recorder(RefusalLimits(per_request=20, burst=30, per_minute=60), clock)
    many = [f"t{i}" for i in range(1000)]
    with caplog.at_level(logging.WARNING, logger="kafkaguard.service.refused"):
        assert len(record(refused, many)) == 21
        partial = record(refused, many)  # 9 tokens left: 8 items and the summary
        assert [e.subject for e in partial] == [f"TOPIC:t{i}" for i in range(8)] + ["CreateTopics"]
        assert partial[-1].details["summary"] == {"request": "CreateTopics", "items": 1000, "recorded": 8,
                                                  "not_recorded": 992}  # fmt: skip
        assert record(refused, many) == []
        assert record(refused, ["one"]) == []
        assert record(refused, ["another"], actor=Actor(principal="User:other", interface="rest")) != []
        clock.now += 1.0  # one token a second
        assert [e.subject for e in record(refused, ["x", "y"])] == ["CreateTopics"]  # one token: the summary alone
        clock.now += 5.0
        assert [e.subject for e in record(refused, ["x", "y"])] == ["TOPIC:x", "TOPIC:y"]
    assert refused.counts() == {RECORDED: 20 + 8 + 1 + 2, SUMMARIZED: 980 + 992 + 2, RATE_LIMITED: 1001}
    lines = [r.getMessage() for r in caplog.records if "refused changes are above" in r.getMessage()]
    assert len(lines) == 1 and lines[0].startswith("User:mallory's")  # once in the interval, not per request
    assert "the 1000 refused item(s) of its CreateTopics" in lines[0]


def test_each_interval_logs_again_and_sums_up_the_last(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    refused, _store, _seen = recorder(RefusalLimits(per_request=1, burst=2, per_minute=0.0001), clock)
    with caplog.at_level(logging.WARNING, logger="kafkaguard.service.refused"):
        for _ in range(5):
            record(refused, ["a", "b"])
        clock.now += 61
        record(refused, ["a", "b"])
        refused.flush()
    messages = [r.getMessage() for r in caplog.records]
    assert sum("refused changes are above" in m for m in messages) == 2  # one per interval
    sums = [m for m in messages if "were not recorded in the management history in the last 60 s" in m]
    assert len(sums) == 2 and "User:mallory 8" in sums[0] and "User:mallory 2" in sums[1]


def test_full_buckets_are_forgotten_at_the_next_interval() -> None:
    clock = Clock()
    refused, _store, _seen = recorder(RefusalLimits(per_request=1, burst=2, per_minute=60), clock)
    for index in range(1000):
        record(refused, ["a"], actor=Actor(principal=f"User:u{index}", interface="rest"))
    assert refused.principals_tracked == 1000
    clock.now += 61
    record(refused, ["a"])
    assert refused.principals_tracked == 1  # only the principal that just spent a token


def test_a_refused_events_texts_and_maps_are_cut() -> None:
    huge = "n" * 100_000
    event = bounded(acl_fields_event("acl.created", MALLORY, {"principal": "User:x", "host": "*",
                                                                  "resource_type": "TOPIC", "resource_name": huge,
                                                                  "pattern_type": "LITERAL", "operation": "READ",
                                                                  "permission_type": "ALLOW"}, DENIED))  # fmt: skip
    cut = f"{'n' * MAX_TEXT}…[{100_000 - MAX_TEXT} more characters]"
    assert event.resource_name == cut and event.details["acl"]["resource_name"] == cut  # type: ignore[index]
    prefix = "TOPIC:LITERAL:"
    assert (
        event.subject
        == f"{prefix}{'n' * (MAX_TEXT - len(prefix))}…[{100_000 + len(prefix) - MAX_TEXT} more characters]"
    )
    quotas = bounded(quota_entity_event(MALLORY, (("user", "x"),), {f"k{i}": 1.0 for i in range(1000)}, DENIED))
    shown = quotas.details["quota"]
    assert isinstance(shown, Mapping) and len(shown) == MAX_ENTRIES + 1
    assert shown["…"] == f"{1000 - MAX_ENTRIES} more entries"
    assert event.actor == MALLORY  # the door's, never cut


def test_limits_must_be_positive() -> None:
    for limits in ({"per_request": 0}, {"burst": 0}, {"per_minute": 0.0}):
        with pytest.raises(ValueError, match="must be positive"):
            RefusalLimits(**limits)


def test_the_relay_keeps_what_was_published_before_a_listener_connected() -> None:
    relay = EventRelay()
    relay.publish([topic("early")])
    seen: list[tuple[str, str]] = []
    relay.connect(lambda category, subject, _data: seen.append((category, subject)))
    relay.publish([topic("late")])
    assert seen == [(MANAGEMENT, "TOPIC:early"), (MANAGEMENT, "TOPIC:late")]
    again: list[str] = []
    relay.connect(lambda _category, subject, _data: again.append(subject))  # a later listener: from now on only
    assert again == []


def test_refused_events_are_what_the_published_schema_admits() -> None:
    """As sent: an unknown mechanism code, a REST binding missing fields, a filter, a summary, a cut map."""
    schema = json.loads((Path(__file__).parents[2] / "docs" / "audit-event.schema.json").read_text("utf-8"))
    check = jsonschema_rs.Draft202012Validator({"$ref": "#/$defs/management", "$defs": schema["$defs"]})
    fields: dict[str, str | None] = dict.fromkeys(FIELDS)
    events = [
        scram_event("scram.upserted", MALLORY, "x", mechanism_name(7), 0, DENIED),
        scram_event("scram.deleted", MALLORY, "x", "<every>", None, DENIED),
        acl_fields_event("acl.created", MALLORY, {**fields, "resource_name": "orders"}, DENIED),
        acl_filter_event(MALLORY, {**fields, "resource_type": "ANY", "pattern_type": "ANY"}, DENIED),
        summary_event(topic("t"), "CreateTopics", 10, 3, 7),
        bounded(quota_entity_event(MALLORY, (("user", "x"),), {f"k{i}": 1.0 for i in range(100)}, DENIED)),
    ]
    assert [[error.message for error in check.iter_errors(event.data())] for event in events] == [[]] * len(events)
