"""Issue 40: the console's Denials tab in a real headless Chromium (screenshots into tmp_path), over a real
``serve --http-listener`` whose audit log holds a denial a real Kafka client (kafka-python) was given: the row shows
who, from where, what and the deciding rule; its Why? button opens the Why? tab filled with that request and asked;
with "refresh every 5 s" on, a new denial appears without a click. A node without ``audit_log`` shows why the list is
empty. With ``KAFKAGUARD_UPDATE_SCREENSHOTS=1`` the tab's screenshot goes to ``docs/console-denials.png``
(``scripts/screenshots``)."""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path

import playwright.sync_api as playwright_sync
import pytest

from tests.console.conftest import NOBODY, ConsoleHandle, start_console
from tests.console.test_api_denials import deny
from tests.console.test_browser import DOCS, _admin_page

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message=r"(read_text|open_text) is deprecated", category=DeprecationWarning)

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.filterwarnings(r"ignore:(read_text|open_text) is deprecated:DeprecationWarning"),
]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleHandle]:
    base = tmp_path_factory.mktemp("denials-page")
    handle = start_console(base / "data", with_kafka=True, audit_log=base / "audit.log", audit_mode="denied")
    try:
        yield handle
    finally:
        handle.stop()
    assert handle.errors == [], f"logged errors: {handle.errors}"


def test_the_denials_tab_lists_a_denial_and_opens_why_with_it(served: ConsoleHandle, tmp_path: Path) -> None:
    expect = playwright_sync.expect
    topic = f"orders-{uuid.uuid4().hex[:6]}"
    deny(served, topic)
    with _admin_page(served, height=900) as (page, problems):
        page.click("#tabs button[data-tab=denials]")
        row = page.locator(f"#denials-table tbody tr[data-resource='{topic}']")
        for _ in range(20):  # the trail writes every 0.2 s: refresh until the denial is there
            if row.count():
                break
            page.click("#denials-form button[type=submit]")
            page.wait_for_timeout(250)
        expect(row).to_have_count(1)
        cells = row.locator("td").all_inner_texts()
        assert cells[1:8] == ["denied", f"User:{NOBODY}", "127.0.0.1", "CREATE", f"TOPIC {topic}", "CreateTopics",
                              "DefaultDeny"]  # fmt: skip
        page.screenshot(path=tmp_path / "denials.png", full_page=True)
        # docs/console-denials.png with KAFKAGUARD_UPDATE_SCREENSHOTS=1 (scripts/screenshots), else a temporary copy
        page.screenshot(path=DOCS / "console-denials.png", clip={"x": 0, "y": 0, "width": 1280, "height": 420})

        row.locator("button", has_text="Why?").click()
        expect(page.locator("#why-view")).to_be_visible()
        why = page.locator("#why-form")
        assert why.locator("[name=principal]").input_value() == f"User:{NOBODY}"
        assert why.locator("[name=host]").input_value() == "127.0.0.1"
        assert why.locator("[name=operation]").input_value() == "CREATE"
        assert why.locator("[name=resource_type]").input_value() == "TOPIC"
        assert why.locator("[name=resource_name]").input_value() == topic
        expect(page.locator("#verdict")).to_have_text("DENIED")
        expect(page.locator("#why-rule")).to_have_text("DefaultDeny")
        page.screenshot(path=tmp_path / "denials-why.png", full_page=True)

        # auto-refresh: a new denial appears with no click on Refresh
        page.click("#tabs button[data-tab=denials]")
        page.check("#denials-auto")
        later = f"later-{uuid.uuid4().hex[:6]}"
        deny(served, later)
        expect(page.locator(f"#denials-table tbody tr[data-resource='{later}']")).to_have_count(1, timeout=15_000)
        # the principal filter
        page.fill("#denials-form [name=principal]", "User:admin")
        page.click("#denials-form button[type=submit]")
        expect(page.locator("#denials-table tbody tr")).to_have_count(0)
        expect(page.locator("#denials-note")).to_have_text("No denial in the audit log for User:admin.")
        assert problems == []


def test_without_an_audit_log_the_tab_says_why_it_is_empty(tmp_path: Path) -> None:
    handle = start_console(tmp_path / "data")
    try:
        with _admin_page(handle, height=600) as (page, problems):
            page.click("#tabs button[data-tab=denials]")
            note = page.locator("#denials-note")
            playwright_sync.expect(note).to_contain_text("No audit log file is configured on this node (audit_log)")
            assert page.locator("#denials-table tbody tr").count() == 0
            page.screenshot(path=tmp_path / "denials-none.png", full_page=True)
            assert problems == []
    finally:
        handle.stop()
    assert handle.errors == []
