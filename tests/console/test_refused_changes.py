"""The console's 403 on a change, in detail (the real-process test is ``tests/server/test_refused_history.py``): a
refused request of many bindings is bounded like any other door's (20 events and a summary naming the route), a body
the route's schema would refuse is recorded as sent, a refused read records nothing, and ``/metrics`` counts it all
(``kafkaguard_refused_changes_total``)."""

from __future__ import annotations

import uuid

from kafkaguard.model import HistoryQuery
from tests.console.conftest import NOBODY, READER, ConsoleHandle


def test_a_403_on_many_bindings_records_the_bound_and_a_summary_naming_the_route(console: ConsoleHandle) -> None:
    prefix = f"many-{uuid.uuid4().hex[:6]}"
    bindings = [{"resource_type": "TOPIC", "resource_name": f"{prefix}-{i}", "principal": "User:x", "operation": "READ",
                 "permission_type": "ALLOW"} for i in range(25)]  # fmt: skip
    with console.client(NOBODY) as rest:
        assert rest.post("/api/acls", json=bindings).status_code == 403
    events = console.services.store.read_history(HistoryQuery(principal=f"User:{NOBODY}", limit=1000))
    ours = [e for e in events if e.subject == "POST /api/acls" or (e.resource_name or "").startswith(prefix)]
    summary, *items = ours
    assert len(items) == 20 and {e.actor.interface for e in ours} == {"rest"}
    assert len({e.actor.request_id for e in ours}) == 1  # one request, one id
    assert summary.details["summary"] == {"request": "POST /api/acls", "items": 25, "recorded": 20, "not_recorded": 5}


def test_a_body_the_schema_refuses_is_recorded_as_sent(console: ConsoleHandle) -> None:
    name = f"odd-{uuid.uuid4().hex[:6]}"
    odd = {"resource_type": "Topic-ish", "resource_name": name, "principal": 42, "operation": "READ"}
    with console.client(NOBODY) as rest:
        assert rest.post("/api/acls", json=odd).status_code == 403  # refused before the body is validated
    [event] = console.services.store.read_history(HistoryQuery(resource_name=name))
    assert dict(event.details["acl"]) == {  # type: ignore[call-overload]
        "principal": "42", "host": None, "resource_type": "Topic-ish", "resource_name": name, "pattern_type": None,
        "operation": "READ", "permission_type": None, "id": None,
    }  # fmt: skip
    assert event.result == "CLUSTER_AUTHORIZATION_FAILED"


def test_a_refused_read_records_nothing_and_metrics_count_the_refusals(console: ConsoleHandle) -> None:
    before = len(console.services.store.read_history(HistoryQuery(principal=f"User:{READER}", limit=1000)))
    with console.client(READER) as rest:  # may describe, not alter
        assert rest.get("/api/history").status_code == 403
        assert rest.get("/api/acls").status_code == 200
        assert rest.delete("/api/groups/ops").status_code == 403
        metrics = rest.get("/metrics").text
    after = console.services.store.read_history(HistoryQuery(principal=f"User:{READER}", limit=1000))
    assert len(after) == before + 1 and after[0].action == "group.member_removed"
    counts = console.services.refused.counts()
    assert counts["recorded"] >= 1
    assert f'kafkaguard_refused_changes_total{{outcome="recorded"}} {counts["recorded"]:.1f}' in metrics
    assert 'kafkaguard_refused_changes_total{outcome="rate_limited"} 0.0' in metrics
