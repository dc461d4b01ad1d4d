"""The proxy's data-plane decisions in the audit log are what ``kafkaguard audit replay/simulate/usage/recommend``
read: every line parses as the pipeline's ``kafkaguard`` format, names the client and the API, and deciding its
action again with the same ACLs gives the logged decision (what ``audit replay`` does at scale)."""

from __future__ import annotations

from kafkaguard.audit.records.record import AuditRecord, from_json_line
from kafkaguard.authorizer.standard import authorize_in
from kafkaguard.model import AclOperation, Action, RequestContext, ResourcePattern, ResourceType
from tests.kafka.broker import KafkaBroker
from tests.kafka.proxy.test_proxy_clients import consume, create_topics, grant, produce, unique, user
from tests.serving import ServerHandle


def test_real_traffic_through_the_proxy_is_audited_for_replay(proxy: ServerHandle, kafka: KafkaBroker):
    allowed, denied, group = unique("audited"), unique("audited-denied"), unique("audited-group")
    create_topics(kafka, allowed, denied)
    name = user(proxy)
    principal = f"User:{name}"
    grant(proxy, principal, ResourceType.TOPIC, allowed, AclOperation.WRITE, AclOperation.READ)
    grant(proxy, principal, ResourceType.GROUP, group, AclOperation.READ)
    assert produce(proxy, name, allowed, 3) == [None] * 3
    produce(proxy, name, denied, 1, **{"message.timeout.ms": 10_000})
    assert len(consume(proxy, name, allowed, group, 3)) == 3

    proxy.audit_records()  # flushes the buffer
    lines = proxy.audit_path.read_text("utf-8").splitlines()
    # the trail's authorization envelopes (logins of the same principal are authentication events)
    decisions = [line for line in lines if '"type":"io.kafkaguard.authorization.v2"' in line]
    parsed = [from_json_line(line) for line in decisions]
    records = [r for r in parsed if isinstance(r, AuditRecord) and r.principal == principal]
    assert len(records) == len([line for line in decisions if principal in line]), "every line parses"
    seen = {(r.api, r.operation.name, r.resource_name, r.decision.name) for r in records}
    assert ("Produce", "WRITE", allowed, "ALLOWED") in seen
    assert ("Metadata", "DESCRIBE", denied, "DENIED") in seen  # the producer learns it there, before any Produce
    assert ("Fetch", "READ", allowed, "ALLOWED") in seen
    assert ("JoinGroup", "READ", group, "ALLOWED") in seen
    snapshot = proxy.services.authorizer.snapshot
    for record in records:
        action = Action(record.operation, ResourcePattern(record.resource_type, record.resource_name,
                                                          record.pattern_type))  # fmt: skip
        [again] = authorize_in(snapshot, RequestContext(record.principal, record.host), [action])
        assert again is record.decision, record
