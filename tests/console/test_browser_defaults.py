"""Issue 40: the console's forms have no risky default, in a real headless Chromium (screenshots into tmp_path).

* Why?: the operation is a request's, never ALL (no request asks for ALL); it starts on READ, so checking alice's
  READ answers ALLOWED instead of a red DENIED for an ALL nobody asked about.
* Add ACL: operation and permission start unchosen and are required, so one click on "Add ACL" grants nothing;
  the browser says what to choose and no ACL is created until both are chosen."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import playwright.sync_api as playwright_sync
import pytest

from kafkaguard.model import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from tests.actors import ACTOR
from tests.console.conftest import ConsoleHandle, start_console
from tests.console.test_browser import _admin_page

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def shown(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleHandle]:
    handle = start_console(tmp_path_factory.mktemp("defaults"))
    handle.services.acls.create_acls(
        [
            AclBinding(
                ResourcePattern(ResourceType.TOPIC, "orders", PatternType.LITERAL),
                AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW),
            )
        ],
        actor=ACTOR,
    )
    try:
        yield handle
    finally:
        handle.stop()
    assert handle.errors == [], f"the console logged errors: {handle.errors}"


def test_why_starts_on_a_concrete_operation_and_offers_no_all(shown: ConsoleHandle, tmp_path: Path) -> None:
    expect = playwright_sync.expect
    with _admin_page(shown, height=900) as (page, problems):
        page.click("#tabs button[data-tab=why]")
        why = page.locator("#why-form")
        operation = why.locator("[name=operation]")
        assert operation.input_value() == "READ"
        options = operation.locator("option").all_inner_texts()
        assert "ALL" not in options and "READ" in options and "WRITE" in options
        why.locator("[name=principal]").fill("User:alice")
        why.locator("[name=resource_name]").fill("orders")
        why.locator("button[type=submit]").click()
        expect(page.locator("#verdict")).to_have_text("ALLOWED")
        page.screenshot(path=tmp_path / "why-default.png", full_page=True)
        assert problems == []


def test_add_acl_needs_an_operation_and_a_permission_chosen(shown: ConsoleHandle, tmp_path: Path) -> None:
    expect = playwright_sync.expect
    before = shown.services.authorizer.acl_count
    with _admin_page(shown, height=900) as (page, problems):
        add = page.locator("#add-form")
        operation, permission = add.locator("[name=operation]"), add.locator("[name=permission_type]")
        assert operation.input_value() == "" and permission.input_value() == ""
        add.locator("[name=principal]").fill("User:mallory")
        add.locator("[name=resource_name]").fill("payments")
        add.locator("button[type=submit]").click()
        # the browser refuses the form: the operation must be chosen first
        assert operation.evaluate("select => !select.validity.valid && select.validationMessage !== ''")
        page.screenshot(path=tmp_path / "add-unchosen.png", full_page=True)
        assert shown.services.authorizer.acl_count == before
        operation.select_option("ALL")  # still offered, only never by default
        add.locator("button[type=submit]").click()
        assert permission.evaluate("select => !select.validity.valid")
        assert shown.services.authorizer.acl_count == before
        permission.select_option("ALLOW")
        add.locator("button[type=submit]").click()
        expect(page.locator("#add-message")).to_contain_text("Added: ALLOW ALL on TOPIC:LITERAL:payments")
        assert shown.services.authorizer.acl_count == before + 1
        # after adding, the form asks again rather than keeping a grant-everything choice
        expect(operation).to_have_value("")
        page.screenshot(path=tmp_path / "add-done.png", full_page=True)
        assert problems == []
