"""Permissive enforcement and shadow ACLs through the proxy's handlers, against the in-memory upstream.

Permissive: what the ACLs deny goes upstream exactly as the client sent it (the fast path: bytes unchanged, answer
relayed unchanged) and each denied decision is in the audit log as DENIED with ``"enforced": false``; the same
request on an enforcing proxy is refused by the proxy (the handler tests). Shadow: a candidate set's flips are
recorded beside the active decisions, and what the client gets is the active set's answer."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from kafkaguard.audit.trail.writer import AuditLog
from kafkaguard.authorizer.rollout import shadow_set
from kafkaguard.bootstrap import Services, build_services
from kafkaguard.config import load_settings
from kafkaguard.model import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from tests.proxy.handlers.test_fetch import fetch, fetched, partitions
from tests.proxy.handlers.test_produce import errors, produce, written
from tests.proxy.memory_upstream import MemoryUpstream, allow, assert_relayed, handle


def _services(tmp_path: Path, **settings: Any) -> Services:
    return build_services(
        load_settings(None, data_dir=tmp_path / "data", super_users="User:admin", audit_log=tmp_path / "audit.log",
                      **settings)
    )  # fmt: skip


@pytest.fixture
def permissive(tmp_path: Path) -> Iterator[Services]:
    built = _services(tmp_path, enforcement="permissive")
    allow(built, "User:alice", ResourceType.TOPIC, "feed-", AclOperation.WRITE, AclOperation.READ)
    yield built
    built.close()


def envelopes(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def lines(path: Path) -> list[dict[str, Any]]:
    """The authorization records of the audit file (the data of its authorization events)."""
    return [e["data"] for e in envelopes(path) if e["type"] == "io.kafkaguard.authorization.v2"]


def test_a_denied_produce_goes_upstream_as_the_client_sent_it_and_is_audited_not_enforced(
    permissive: Services, tmp_path: Path
):
    upstream, audit = MemoryUpstream(written), AuditLog(tmp_path / "audit.log")
    handled = handle(permissive, upstream, produce("feed-a", "secret-b"), audit=audit)
    assert_relayed(handled, upstream)
    assert errors(handled.answer()) == {"feed-a": (ErrorCode.none, 42), "secret-b": (ErrorCode.none, 42)}
    (denial,) = lines(tmp_path / "audit.log")  # audit_mode denied: the allowed topic is not written
    assert (denial["resource_name"], denial["operation"], denial["decision"], denial["enforced"]) == (
        "secret-b", "WRITE", "DENIED", False
    )  # fmt: skip
    assert permissive.rollout.would_be_denials == 1


def test_a_denied_fetch_goes_upstream_as_the_client_sent_it(permissive: Services, tmp_path: Path):
    upstream, audit = MemoryUpstream(fetched), AuditLog(tmp_path / "audit.log", mode="all")
    handled = handle(permissive, upstream, fetch("feed-a", "secret-b"), audit=audit)
    assert_relayed(handled, upstream)
    assert partitions(handled.answer()) == {"secret-b": (ErrorCode.none, 100), "feed-a": (ErrorCode.none, 100)}
    written_ = {(r["resource_name"], r["decision"], r.get("enforced", True)) for r in lines(tmp_path / "audit.log")}
    assert written_ == {("feed-a", "ALLOWED", True), ("secret-b", "DENIED", False)}


def test_an_enforcing_proxy_refuses_the_same_produce(tmp_path: Path):
    services = _services(tmp_path)
    try:
        allow(services, "User:alice", ResourceType.TOPIC, "feed-", AclOperation.WRITE)
        upstream, audit = MemoryUpstream(written), AuditLog(tmp_path / "audit.log")
        handled = handle(services, upstream, produce("feed-a", "secret-b"), audit=audit)
        assert [t.name for t in upstream.bodies(upstream.sent[0].api_key)[0].topic_data] == ["feed-a"]
        assert errors(handled.answer())["secret-b"][0] == ErrorCode.topic_authorization_failed
        (denial,) = lines(tmp_path / "audit.log")
        assert denial["decision"] == "DENIED" and "enforced" not in denial
    finally:
        services.close()


def _binding(principal: str, name: str, operation: AclOperation) -> AclBinding:
    return AclBinding(
        ResourcePattern(ResourceType.TOPIC, name, PatternType.PREFIXED),
        AccessControlEntry(principal, "*", operation, AclPermissionType.ALLOW),
    )


def test_shadow_flips_are_recorded_and_the_active_answer_stands(tmp_path: Path):
    services = _services(tmp_path)
    try:
        allow(services, "User:alice", ResourceType.TOPIC, "feed-", AclOperation.WRITE)
        # the candidate: alice may write secret- but no longer feed-
        candidate = [_binding("User:alice", "secret-", AclOperation.WRITE)]
        authorizer = services.authorizer
        services.rollout.shadow = shadow_set("candidate.yaml", candidate, super_users=authorizer.super_users,
                                             allow_everyone_if_no_acl_found=False, memberships={})  # fmt: skip
        upstream, audit = MemoryUpstream(written), AuditLog(tmp_path / "audit.log")
        handled = handle(services, upstream, produce("feed-a", "secret-b", "other-c"), audit=audit)
        assert errors(handled.answer())["secret-b"][0] == ErrorCode.topic_authorization_failed  # the active set's
        events = [e for e in envelopes(tmp_path / "audit.log") if e["type"] == "io.kafkaguard.shadow.v1"]
        flipped = {(e["data"]["resource_name"], e["data"]["decision"], e["data"]["shadow_decision"]) for e in events}
        assert flipped == {("feed-a", "ALLOWED", "DENIED"), ("secret-b", "DENIED", "ALLOWED")}
        assert {e["subject"] for e in events} == {"TOPIC:feed-a", "TOPIC:secret-b"}
        newly_allowed = next(e for e in events if e["data"]["resource_name"] == "secret-b")
        assert newly_allowed["data"]["shadow_rule"].startswith("MatchingAcl(") and newly_allowed["specversion"] == "1.0"
        # other-c is denied by both: no shadow event, only its (active) denial record
        assert {record["resource_name"] for record in lines(tmp_path / "audit.log")} == {"secret-b", "other-c"}
        assert (services.rollout.shadow_newly_denied, services.rollout.shadow_newly_allowed) == (1, 1)
    finally:
        services.close()
