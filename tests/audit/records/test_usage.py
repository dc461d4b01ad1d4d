"""The usage aggregator: allowed decisions folded per access and window, repeated denials collapsed, counts exact
whatever the windows and the key bound."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkaguard.audit.records import AuditRecord, from_json_line, to_json_line
from kafkaguard.audit.records.usage import UsageAggregator, usage_key
from kafkaguard.model import AclOperation, AuthorizationResult, ResourceType

ALLOWED, DENIED = AuthorizationResult.ALLOWED, AuthorizationResult.DENIED
#: The start of a 60-second window (aligned to the epoch).
W = datetime(2025, 3, 14, 9, 26, 0, tzinfo=UTC)
RULE = "MatchingAcl(acl=(pattern=Topic:LITERAL:payments, entry=(x)), id=a1)"


def rec(
    second: float,
    *,
    decision: AuthorizationResult = ALLOWED,
    api: str = "Produce",
    op: AclOperation = AclOperation.WRITE,
    name: str = "payments",
    principal: str = "User:orders-svc",
    rule: str = RULE,
) -> AuditRecord:
    return AuditRecord(
        time=W + timedelta(seconds=second),
        principal=principal,
        host="10.20.3.17",
        api=api,
        operation=op,
        resource_type=ResourceType.TOPIC,
        resource_name=name,
        decision=decision,
        rule=rule,
    )


def at(second: float) -> datetime:
    return W + timedelta(seconds=second)


def test_the_docstring_example() -> None:
    usage = UsageAggregator(window_seconds=60)
    denied = {"decision": DENIED, "api": "Metadata", "op": AclOperation.DESCRIBE, "name": "pii", "rule": "DefaultDeny"}
    assert usage.add([rec(10), rec(20, **denied), rec(40), rec(50, **denied)]) == []  # type: ignore[arg-type]
    assert usage.expire(at(59.9)) == []  # the window has not ended
    allowed, refused = usage.expire(at(60.1))
    assert (allowed.count, allowed.time, allowed.last_time, allowed.api) == (2, at(10), at(40), "Produce")
    assert (refused.count, refused.time, refused.last_time, refused.decision) == (2, at(20), at(50), DENIED)
    assert len(usage) == 0 and usage.expire(at(200)) == []


def test_allowed_decisions_fold_across_apis_denials_do_not() -> None:
    usage = UsageAggregator(window_seconds=60)
    usage.add([rec(1, api="Produce"), rec(2, api="Metadata"), rec(3, decision=DENIED, api="Produce", rule="x")])
    usage.add([rec(4, decision=DENIED, api="Metadata", rule="x")])
    allowed, *denied = usage.drain()
    assert (allowed.count, allowed.api) == (2, None)  # several APIs: null
    assert [(r.api, r.count) for r in denied] == [("Produce", 1), ("Metadata", 1)]


def test_a_single_request_stays_a_plain_record() -> None:
    usage = UsageAggregator(window_seconds=60)
    usage.add([rec(5)])
    assert usage.drain() == [rec(5)]


def test_keys_differ_by_principal_resource_operation_and_rule() -> None:
    usage = UsageAggregator(window_seconds=60)
    usage.add([rec(1), rec(2, principal="User:b"), rec(3, name="other"), rec(4, op=AclOperation.DESCRIBE)])
    usage.add([rec(5, rule="MatchingAcl(acl=(pattern=Topic:PREFIXED:pay, entry=(x)), id=a2)"), rec(6)])
    assert [r.count for r in usage.drain()] == [2, 1, 1, 1, 1]


def test_a_record_of_a_later_window_closes_the_open_one() -> None:
    usage = UsageAggregator(window_seconds=60)
    assert usage.add([rec(1), rec(59)]) == []
    closed = usage.add([rec(61)])
    assert [(r.count, r.time, r.last) for r in closed] == [(2, at(1), at(59))]
    assert [(r.count, r.time) for r in usage.drain()] == [(1, at(61))]


def test_a_late_record_counts_in_the_open_window_and_moves_its_first_time() -> None:
    usage = UsageAggregator(window_seconds=60)
    usage.add([rec(70), rec(30)])  # the clock stepped back
    (folded,) = usage.drain()
    assert (folded.count, folded.time, folded.last) == (2, at(30), at(70))


def test_the_key_bound_flushes_early_never_drops() -> None:
    usage = UsageAggregator(window_seconds=60, max_keys=2)
    early = usage.add([rec(1, name="a"), rec(2, name="b"), rec(3, name="a"), rec(4, name="c")])
    assert [(r.resource_name, r.count) for r in early] == [("a", 2), ("b", 1)]
    assert usage.early_flushes == 1
    assert len(usage) == 1
    usage.add([rec(5, name="a")])  # same window, fresh state
    assert [(r.resource_name, r.count) for r in usage.expire(at(61))] == [("c", 1), ("a", 1)]


def test_folded_records_fold_again() -> None:
    """A record that already stands for several requests (e.g. re-aggregating a usage log) adds its count."""
    usage = UsageAggregator(window_seconds=60)
    usage.add([replace(rec(1), count=5, last_time=at(9)), rec(20)])
    (folded,) = usage.drain()
    assert (folded.count, folded.time, folded.last) == (6, at(1), at(20))


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="window_seconds must be > 0"):
        UsageAggregator(window_seconds=0)
    with pytest.raises(ValueError, match="max_keys must be >= 1"):
        UsageAggregator(window_seconds=1, max_keys=0)


records = st.builds(
    lambda second, decision, api, name, principal: rec(
        second, decision=decision, api=api, name=name, principal=principal
    ),
    st.integers(0, 600_000).map(lambda ms: ms / 1000),  # JSON keeps milliseconds
    st.sampled_from([ALLOWED, DENIED]),
    st.sampled_from(["Produce", "Fetch", "Metadata"]),
    st.sampled_from(["a", "b", "c"]),
    st.sampled_from(["User:x", "User:y"]),
)


@given(
    batches=st.lists(st.lists(records, max_size=8), max_size=12),
    window=st.sampled_from([0.5, 7.0, 60.0]),
    max_keys=st.integers(1, 6),
    expire_after=st.lists(st.floats(0, 700, allow_nan=False), max_size=12),
)
def test_aggregating_keeps_every_count(batches, window, max_keys, expire_after) -> None:
    """Aggregating then expanding (each record as ``count`` requests) gives the per-key counts, first and last
    times of the individual records, whatever the windows, the bound and the expiries; records round-trip JSON."""
    usage = UsageAggregator(window_seconds=window, max_keys=max_keys)
    written: list[AuditRecord] = []
    for i, batch in enumerate(batches):
        written += usage.add(sorted(batch, key=lambda r: r.time))
        if i < len(expire_after):
            written += usage.expire(at(expire_after[i]))
    written += usage.drain()
    individual = [r for batch in batches for r in sorted(batch, key=lambda r: r.time)]
    assert Counter({usage_key(r): 0 for r in individual}) + Counter(usage_key(r) for r in individual) == sum(
        (Counter({usage_key(r): r.count}) for r in written), Counter()
    )
    for key in {usage_key(r) for r in individual}:
        mine = [r for r in individual if usage_key(r) == key]
        folded = [r for r in written if usage_key(r) == key]
        assert min(r.time for r in folded) == min(r.time for r in mine)
        assert max(r.last for r in folded) == max(r.time for r in mine)
    assert all(from_json_line(to_json_line(r)) == r for r in written)
    assert all(r.count >= 1 and r.last >= r.time for r in written)
