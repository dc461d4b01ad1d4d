from __future__ import annotations

from datetime import UTC, datetime

from kafkaguard.pipeline.report import Report, bar_chart, line_chart, table


def test_everything_is_escaped() -> None:
    report = Report("t <x>", "s & s")
    report.card("c", "<b>")
    report.section("h", table(["<c>"], [("<script>", 3)]), bar_chart([("<evil>", 2)]))
    html = report.render()
    assert "<script>" not in html
    assert "&lt;script&gt;" in html
    assert "&lt;evil&gt;" in html
    assert html.startswith("<!DOCTYPE html>")


def test_charts_handle_empty_and_single_points() -> None:
    assert "no data" in bar_chart([])
    assert "no data" in line_chart({})
    one = line_chart({"a": [(datetime(2025, 1, 1, tzinfo=UTC), 5)]})
    assert "<circle" in one
    two = line_chart({"a": [(datetime(2025, 1, 1, tzinfo=UTC), 5), (datetime(2025, 1, 2, tzinfo=UTC), 0)]})
    assert "<polyline" in two
