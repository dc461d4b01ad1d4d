"""The spool's drops per principal and category: exact for the first principals, bounded for client-chosen names,
the top ones by name and the rest together, in the console's metrics."""

from __future__ import annotations

from kafkaguard.audit.records.trail_statistics import OTHERS, AuditTrailStatistics, DropCounts
from kafkaguard.console.metrics import ConsoleMetrics


def test_the_top_principals_by_name_and_the_rest_together():
    counts = DropCounts()
    counts.add("User:noisy", "authorization", 5790)
    counts.add("User:noisy", "authentication", 1)
    counts.add("User:quiet", "authentication", 2)
    counts.add("User:other", "authorization", 3)
    assert counts.top(1) == {
        ("User:noisy", "authentication"): 1,
        ("User:noisy", "authorization"): 5790,
        (OTHERS, "authentication"): 2,
        (OTHERS, "authorization"): 3,
    }
    assert counts.principals(2) == [("User:noisy", 5791), ("User:other", 3)]
    assert counts.total == 5796


def test_principals_beyond_the_bound_count_together_and_nothing_is_lost():
    counts = DropCounts(max_principals=3)
    for n in range(100):
        counts.add(f"User:claimed-{n}", "authentication", 1)
    assert counts.total == 100
    assert counts.of(OTHERS) == {"authentication": 97}
    assert len(counts.principals(1000)) == 4  # three by name, the rest together


def test_the_drops_reach_the_console_metrics():
    statistics = AuditTrailStatistics()
    statistics.count_spool_drops({("User:noisy", "authorization"): 7, ("User:quiet", "management"): 1})
    text = ConsoleMetrics(lambda: 0, audit_trail=statistics).render().decode()
    assert 'kafkaguard_audit_spool_dropped_records_total{category="authorization",principal="User:noisy"} 7.0' in text
    assert 'kafkaguard_audit_spool_dropped_records_total{category="management",principal="User:quiet"} 1.0' in text
