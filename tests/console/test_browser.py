"""The web page in a real headless Chromium (Debian's ``chromium``, installed by ``scripts/setup``; never
``playwright install``): log in, add an ACL, see it in the list, explain a decision, delete it — under the
console's Content-Security-Policy, with no violation or script error. Each step saves a screenshot: into a
temporary directory, so the suite leaves the tree as it found it, or with ``KAFKAGUARD_UPDATE_SCREENSHOTS=1`` into
``docs/`` (``docs/console-*.png``, committed; the README shows one)."""

from __future__ import annotations

import contextlib
import itertools
import os
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

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
from tests.console.conftest import ADMIN, ADMIN_PASSWORD, ConsoleHandle, start_console

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
DOCS = (
    Path(__file__).resolve().parents[2] / "docs"
    if os.environ.get("KAFKAGUARD_UPDATE_SCREENSHOTS") == "1"
    else Path(tempfile.mkdtemp(prefix="kafkaguard-screenshots-"))
)

pytestmark = pytest.mark.e2e

# A missing browser fails the suite rather than skipping it: scripts/setup installs Debian's chromium.
if not os.access(CHROMIUM, os.X_OK):
    pytest.fail(f"{CHROMIUM} is missing: run scripts/setup as root, or apt-get install chromium", pytrace=False)

import playwright.sync_api as playwright_sync  # noqa: E402 - after the check that explains a missing browser


@pytest.fixture(scope="module")
def shown(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleHandle]:
    """A console with a few ACLs and users, so the screenshots show something real. ACL ids are numbered instead
    of random while it runs, so that the committed screenshots change only when the page does."""
    counter = itertools.count(1)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(uuid, "uuid4", lambda: uuid.UUID(int=(4 << 76) | (2 << 62) | next(counter)))
        yield from _shown(tmp_path_factory)


def _shown(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleHandle]:
    handle = start_console(tmp_path_factory.mktemp("browser"))
    acls = [
        ("orders.", PatternType.PREFIXED, "User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW),
        ("orders.", PatternType.PREFIXED, "User:alice", "*", AclOperation.WRITE, AclPermissionType.ALLOW),
        ("payments", PatternType.LITERAL, "User:billing", "*", AclOperation.WRITE, AclPermissionType.ALLOW),
        ("*", PatternType.LITERAL, "User:*", "10.9.9.9", AclOperation.ALL, AclPermissionType.DENY),
    ]
    handle.services.acls.create_acls(
        [
            AclBinding(ResourcePattern(ResourceType.TOPIC, name, pattern), AccessControlEntry(p, h, op, perm))
            for name, pattern, p, h, op, perm in acls
        ],
        actor=ACTOR,
    )
    handle.add_user("alice", "alice-pw")
    try:
        yield handle
    finally:
        handle.stop()
    assert handle.errors == [], f"the console logged errors: {handle.errors}"


def _violation(text: str) -> bool:
    return "Content Security Policy" in text or text.startswith("Refused to")


@contextlib.contextmanager
def _admin_page(shown: ConsoleHandle, *, height: int) -> Iterator[tuple[playwright_sync.Page, list[str]]]:
    """Headless Chromium on the console, logged in as the admin, and the CSP violations and script errors it
    reports (a test asserts the list is empty at its end)."""
    with playwright_sync.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": height})
            page.set_default_timeout(10_000)
            problems: list[str] = []
            page.on("console", lambda message: problems.append(message.text) if _violation(message.text) else None)
            page.on("pageerror", lambda error: problems.append(str(error)))
            page.goto(shown.url)
            page.fill("#login-user", ADMIN)
            page.fill("#login-password", ADMIN_PASSWORD)
            page.click("#login-form button[type=submit]")
            playwright_sync.expect(page.locator("#whoami-name")).to_have_text("User:admin")
            yield page, problems
        finally:
            browser.close()


def test_log_in_add_see_explain_delete(shown: ConsoleHandle) -> None:
    with playwright_sync.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 860})
            page.set_default_timeout(10_000)
            page.on("dialog", lambda dialog: dialog.accept())
            # The page must work under the console's Content-Security-Policy: Chromium reports each violation as
            # a console error ("Refused to load/execute/apply ... Content Security Policy ..."), and script errors
            # as page errors. (Its own /favicon.ico 404 and the 401 of the wrong password are not problems.)
            problems: list[str] = []
            page.on("console", lambda message: problems.append(message.text) if _violation(message.text) else None)
            page.on("pageerror", lambda error: problems.append(str(error)))
            expect = playwright_sync.expect

            # 1. Log in (a wrong password first: the page says so, the browser shows no dialog).
            page.goto(shown.url)
            page.fill("#login-user", ADMIN)
            page.fill("#login-password", "not-the-password")
            page.click("#login-form button[type=submit]")
            expect(page.locator("#login-message")).to_have_text("Wrong user name or password.")
            page.fill("#login-password", ADMIN_PASSWORD)
            page.screenshot(path=DOCS / "console-login.png")
            page.click("#login-form button[type=submit]")
            expect(page.locator("#whoami-name")).to_have_text("User:admin")
            expect(page.locator("#acl-count")).to_have_text(str(shown.services.authorizer.acl_count))

            # 2. Add an ACL, with a validation message for a bad principal first.
            add = page.locator("#add-form")
            add.locator("[name=principal]").fill("alice")
            add.locator("[name=resource_name]").fill("orders.eu")
            add.locator("[name=operation]").select_option("WRITE")
            add.locator("[name=permission_type]").select_option("DENY")
            add.locator("button[type=submit]").click()
            expect(page.locator("#add-message")).to_contain_text("Refused: Invalid principal 'alice'")
            add.locator("[name=principal]").fill("User:alice")
            add.locator("button[type=submit]").click()
            expect(page.locator("#add-message")).to_contain_text(
                "Added: DENY WRITE on TOPIC:LITERAL:orders.eu for User:alice from *"
            )

            # 3. See it in the list (filtered with MATCH: everything that applies to topic orders.eu).
            row = page.locator("#acl-table tbody tr", has_text="orders.eu")
            expect(row).to_have_count(1)
            expect(row).to_contain_text("DENY")
            filters = page.locator("#filter-form")
            filters.locator("[name=resource_type]").select_option("TOPIC")
            filters.locator("[name=resource_name]").fill("orders.eu")
            filters.locator("[name=pattern_type]").select_option("MATCH")
            filters.locator("button[type=submit]").click()
            expect(page.locator("#acl-count")).to_have_text("4")  # orders.eu, orders. (READ, WRITE), the * wildcard
            page.screenshot(path=DOCS / "console-acls.png", full_page=True)

            # 4. Explain a decision: alice may not write orders.eu; the DENY decides, the matching ALLOW is listed.
            page.click("#tabs button[data-tab=why]")
            why = page.locator("#why-form")
            why.locator("[name=principal]").fill("User:alice")
            why.locator("[name=host]").fill("10.0.0.7")
            why.locator("[name=operation]").select_option("WRITE")
            why.locator("[name=resource_name]").fill("orders.eu")
            why.locator("button[type=submit]").click()
            expect(page.locator("#verdict")).to_have_text("DENIED")
            expect(page.locator("#why-explanation")).to_contain_text("a matching DENY always wins")
            decisive = page.locator("#why-table tr.decisive")
            expect(decisive).to_have_count(1)
            expect(decisive).to_contain_text("orders.eu")
            why.locator("[name=operation]").select_option("DESCRIBE")
            why.locator("button[type=submit]").click()
            expect(page.locator("#verdict")).to_have_text("ALLOWED")
            expect(page.locator("#why-table tbody tr")).to_have_count(2)  # READ and WRITE on orders. imply DESCRIBE
            why.locator("[name=operation]").select_option("WRITE")
            why.locator("button[type=submit]").click()
            expect(page.locator("#verdict")).to_have_text("DENIED")
            expect(page.locator("#why-table tbody tr")).to_have_count(2)
            expect(page.locator("#why-table tr.decisive")).to_contain_text("DENY")
            page.screenshot(path=DOCS / "console-explain.png", full_page=True)

            # 5. Delete it from the list.
            page.click("#tabs button[data-tab=acls]")
            row = page.locator("#acl-table tbody tr", has_text="orders.eu")
            expect(row).to_have_count(1)
            row.locator("button.danger").click()
            expect(page.locator("#acl-list-message")).to_contain_text("Deleted 1 ACL(s)")
            expect(page.locator("#acl-table tbody tr", has_text="orders.eu")).to_have_count(0)
            expect(page.locator("#acl-count")).to_have_text("3")
            page.screenshot(path=DOCS / "console-deleted.png", full_page=True)

            # Users: the list shows mechanisms and iterations; set a password through the page.
            page.click("#tabs button[data-tab=users]")
            form = page.locator("#password-form")
            form.locator("[name=name]").fill("bob")
            form.locator("[name=password]").fill("bob-pw")
            form.locator("[name=mechanism]").select_option("both")
            form.locator("button[type=submit]").click()
            expect(page.locator("#password-message")).to_contain_text("Password set for User:bob")
            expect(page.locator("#user-table tbody tr", has_text="bob")).to_contain_text("SCRAM-SHA-512 · 8192")
            page.screenshot(path=DOCS / "console-users.png", full_page=True)
            assert problems == []
            assert page.evaluate("() => document.styleSheets[0].cssRules.length") > 0  # style.css applied
        finally:
            browser.close()
    assert shown.services.authorizer.acl_count == 5  # the four above and reader's cluster ACL


def test_who_can_page_groups_holders_and_a_principals_reach(shown: ConsoleHandle) -> None:
    """The "Who can?" tab: add group members, then ask who can act on a topic (the group expanded, a CIDR row)
    and what a member can do (its groups, patterns and the catalog's topics, decided)."""
    from kafkaguard.service import NewTopic

    shown.services.acls.create_acls(
        [
            AclBinding(
                ResourcePattern(ResourceType.TOPIC, "payments", PatternType.LITERAL),
                AccessControlEntry("Group:ops", "*", AclOperation.READ, AclPermissionType.ALLOW),
            ),
            AclBinding(
                ResourcePattern(ResourceType.TOPIC, "payments", PatternType.LITERAL),
                AccessControlEntry("User:carol", "10.0.0.0/8", AclOperation.WRITE, AclPermissionType.DENY),
            ),
        ],
        actor=ACTOR,
    )
    shown.services.topics.create_topics(
        [NewTopic(name="payments", num_partitions=1, replication_factor=1)], actor=ACTOR
    )
    with _admin_page(shown, height=1100) as (page, problems):
        expect = playwright_sync.expect
        page.click("#tabs button[data-tab=access]")

        # Groups: a nested group is refused with what to fix, then two members are added.
        groups = page.locator("#group-form")
        groups.locator("[name=group]").fill("ops")
        groups.locator("[name=members]").fill("Group:admins")
        groups.locator("button[type=submit]").click()
        expect(page.locator("#group-message")).to_contain_text("groups do not nest")
        groups.locator("[name=members]").fill("User:carol, User:dave")
        groups.locator("button[type=submit]").click()
        expect(page.locator("#group-message")).to_have_text("Group:ops: User:carol, User:dave")
        expect(page.locator("#group-table tr[data-group=ops]")).to_contain_text("User:dave")

        # Who can act on payments: the group's members, billing, the wildcard DENY's row, carol's CIDR row.
        holders = page.locator("#holders-form")
        holders.locator("[name=resource_type]").select_option("TOPIC")
        holders.locator("[name=resource_name]").fill("payments")
        holders.locator("button[type=submit]").click()
        dave = page.locator('#holders-table tr[data-principal="User:dave"][data-host="*"]')
        expect(dave).to_contain_text("Group:ops")
        expect(dave.locator("td.allowed")).to_have_text("READ, DESCRIBE")
        carol_inside = page.locator('#holders-table tr[data-principal="User:carol"][data-host="10.0.0.0/8"]')
        expect(carol_inside.locator("td.denied")).to_contain_text("WRITE")
        billing = page.locator('#holders-table tr[data-principal="User:billing"]')
        expect(billing.locator("td.allowed")).to_have_text("WRITE, DESCRIBE")
        expect(page.locator("#holders-super")).to_have_text("User:admin")

        # What carol can do from inside 10.0.0.0/8: her group, the patterns, payments decided.
        can = page.locator("#can-form")
        can.locator("[name=principal]").fill("User:carol")
        can.locator("[name=host]").fill("10.1.2.3")
        can.locator("button[type=submit]").click()
        expect(page.locator("#can-groups")).to_have_text("Group:ops")
        topic = page.locator('#can-topics tr[data-topic="payments"]')
        expect(topic.locator("td.allowed")).to_have_text("READ, DESCRIBE")
        expect(topic.locator("td.denied")).to_contain_text("WRITE")
        page.screenshot(path=DOCS / "console-access.png", full_page=True)

        # Remove dave from the group through the page: the store and the authorizer agree at once.
        page.locator("#group-table tr[data-group=ops] button[title='remove from the group']").last.click()
        expect(page.locator("#group-message")).to_have_text("Removed User:dave from Group:ops.")
        assert dict(shown.services.groups.groups()) == {"ops": ("User:carol",)}
        assert problems == []


def test_history_view_answers_who_gave_bob_access_and_when(shown: ConsoleHandle) -> None:
    """The History tab: an ACL added through the page and one refused binding appear as events with the actor, where
    from and the door; the filters narrow to one principal and one resource."""
    with _admin_page(shown, height=900) as (page, problems):
        expect = playwright_sync.expect

        # Through the page: a CLUSTER binding not on kafka-cluster is refused (by the service, as Kafka
        # does); then bob gets READ on pii-orders.
        add = page.locator("#add-form")
        add.locator("[name=principal]").fill("User:bob")
        add.locator("[name=resource_type]").select_option("CLUSTER")
        add.locator("[name=resource_name]").fill("pii-orders")
        add.locator("[name=operation]").select_option("ALTER")
        add.locator("[name=permission_type]").select_option("ALLOW")  # no default (issue 40)
        add.locator("button[type=submit]").click()
        expect(page.locator("#add-message")).to_contain_text("Refused")
        add.locator("[name=resource_type]").select_option("TOPIC")
        add.locator("[name=operation]").select_option("READ")
        add.locator("button[type=submit]").click()
        expect(page.locator("#add-message")).to_contain_text("Added: ALLOW READ on TOPIC:LITERAL:pii-orders")

        page.click("#tabs button[data-tab=history]")
        history = page.locator("#history-form")
        history.locator("[name=principal]").fill("User:bob")
        history.locator("[name=resource]").fill("pii-orders")
        history.locator("[name=resource_type]").select_option("TOPIC")
        history.locator("button[type=submit]").click()
        expect(page.locator("#history-count")).to_have_text("1")
        row = page.locator('#history-table tbody tr[data-action="acl.created"]')
        expect(row).to_contain_text("User:admin")
        expect(row).to_contain_text("127.0.0.1")
        expect(row).to_contain_text("rest")
        expect(row).to_contain_text("ALLOW User:bob READ from * on TOPIC:LITERAL:pii-orders")
        expect(row).to_contain_text("SUCCESS")

        # The refused attempt is in the history too, with Kafka's error.
        history.locator("[name=resource_type]").select_option("CLUSTER")
        history.locator("button[type=submit]").click()
        expect(page.locator("#history-table tbody tr")).to_have_count(1)
        expect(page.locator("#history-table tbody tr")).to_contain_text("INVALID_REQUEST")
        history.locator("button[type=reset]").click()
        expect(page.locator("#history-count")).not_to_have_text("1")
        page.screenshot(path=DOCS / "console-history.png", full_page=True)
        assert problems == []
