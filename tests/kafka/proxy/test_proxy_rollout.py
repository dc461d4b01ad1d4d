"""Rolling out ACL changes against the real Kafka broker (issue 27's proof).

One traffic script — a producer to an allowed and to a not-yet-allowed topic, a consumer with a group, admin calls
(CreateTopics, DescribeConfigs) — runs through

* a **permissive** proxy (active ACLs A, ``audit_mode: all``): every request reaches the broker as the client sent it
  (the not-yet-allowed produce is written, the topic is created), and the would-be denials in its audit log are
  exactly what ``kafkaguard audit simulate`` computes offline, from that log's authorization records, for the change
  from "everything allowed" (what the proxy effectively enforced: the broker's own rules, the proxy logged in as its
  super user) to A;
* an enforcing proxy with a **shadow ACL set** B (an ``apply`` YAML file): its shadow events are exactly the flips
  ``audit simulate`` computes from its ``all`` log for the change from A to B — per access (principal, host,
  operation, resource), direction and number of requests.

Permissive is visible: a WARNING at start, ``/healthz`` and ``/metrics`` of a console on the proxy's services; and it
never reaches kafkaguard's own APIs (CreateAcls stays refused).
"""

from __future__ import annotations

import functools
import json
import logging
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pyarrow.parquet as pq
import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin._acl import AclBinding as KafkaAclBinding
from confluent_kafka.admin._acl import AclOperation as KafkaAclOperation
from confluent_kafka.admin._acl import AclPermissionType as KafkaAclPermissionType
from confluent_kafka.admin._config import ConfigResource
from confluent_kafka.admin._resource import ResourcePatternType
from confluent_kafka.admin._resource import ResourceType as KafkaResourceType
from confluent_kafka.cimpl import NewTopic
from typer.testing import CliRunner

from kafkaguard.authorizer.rollout import stored_from_file
from kafkaguard.cli.aclfile import load_acl_file
from kafkaguard.cli.main import app as cli
from kafkaguard.console import create_app
from kafkaguard.model import AclOperation, ResourceType
from kafkaguard.model.acl_json import acls_to_document
from kafkaguard.node.rollout_watch import PERMISSIVE_WARNING
from kafkaguard.pipeline.jobs.entry import main as audit_job
from kafkaguard.proxy.app import ProxyServer
from tests.kafka.broker import KafkaBroker
from tests.kafka.proxy.conftest import start_proxy
from tests.kafka.proxy.test_proxy_admin import broker_topics, outcomes, proxied_admin
from tests.kafka.proxy.test_proxy_clients import consume, create_topics, grant, produce, unique, user
from tests.serving import ServerHandle

TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
TIMEOUT = 30
#: An access as ``audit simulate`` keys it.
Key = tuple[str, str, str, str, str]


@dataclass(frozen=True)
class Names:
    allowed: str  # A and B: produce, consume
    pending: str  # B only: produce
    created: str  # B only: CreateTopics
    group: str  # A only: the consumer's group

    @classmethod
    def fresh(cls) -> Names:
        return cls(unique("ok"), unique("pending"), unique("created"), unique("group"))


def grant_active(proxy: ServerHandle, principal: str, n: Names) -> None:
    """ACL set A, in the proxy's store."""
    grant(proxy, principal, TOPIC, n.allowed, AclOperation.WRITE, AclOperation.READ, AclOperation.DESCRIBE,
          AclOperation.DESCRIBE_CONFIGS)  # fmt: skip
    grant(proxy, principal, GROUP, n.group, AclOperation.READ)


def candidate_file(path: Path, principal: str, n: Names) -> Path:
    """ACL set B, as ``kafkaguard apply`` reads it: the group and DescribeConfigs gone, a produce and a creation
    added."""
    path.write_text(f"""\
principals:
  "{principal}":
    acls:
      - topic: {n.allowed}
        operations: [Write, Read, Describe]
      - topic: {n.pending}
        operations: [Write, Describe]
      - topic: {n.created}
        operations: [Create]
""")
    return path


def traffic(proxy: ServerHandle, kafka: KafkaBroker, name: str, n: Names) -> dict[str, Any]:
    """The script: what each step answered the client."""
    create_topics(kafka, n.allowed, n.pending)
    produced = produce(proxy, name, n.allowed, 3)
    pending = produce(proxy, name, n.pending, 1, **{"message.timeout.ms": 10_000})
    consumed = consume(proxy, name, n.allowed, n.group, 3)
    admin = proxied_admin(proxy, name)
    created = outcomes(admin.create_topics([NewTopic(n.created, 1, 1)], request_timeout=TIMEOUT))
    described = outcomes(admin.describe_configs([ConfigResource(KafkaResourceType.TOPIC, n.allowed)]))
    return {"produced": produced, "pending": pending, "consumed": consumed,
            "created": list(created.values()), "described": list(described.values())}  # fmt: skip


def key(record: dict[str, Any]) -> Key:
    return (record["principal"], record["host"], record["operation"], record["resource_type"],
            record["resource_name"])  # fmt: skip


def simulate(directory: Path, records: list[dict[str, Any]], current: dict[str, Any],
             proposed: dict[str, Any]) -> dict[tuple[Key, str, str], int]:  # fmt: skip
    """``kafkaguard audit simulate`` (Spark, local) over ``records``: (access, current, proposed) → requests."""
    directory.mkdir()
    log, before, after = directory / "audit.log", directory / "current.json", directory / "proposed.json"
    log.write_text("".join(json.dumps(r) + "\n" for r in records))
    before.write_text(json.dumps(current))
    after.write_text(json.dumps(proposed))
    out = directory / "out"
    code = audit_job(["simulate", "--log", str(log), "--current", str(before), "--proposed", str(after),
                      "--out", str(out), "--master", "local[1]", "--super-users", "User:admin"])  # fmt: skip
    assert code == 0
    return {
        (key(row), row["current_decision"], row["proposed_decision"]): row["requests"]
        for row in pq.read_table(out / "flips").to_pylist()
    }


def authorization_records(proxy: ServerHandle, principal: str) -> list[dict[str, Any]]:
    """The proxy's authorization records of ``principal`` (not its shadow events)."""
    return [r for r in proxy.audit_records() if r["principal"] == principal]


#: "Everything allowed": what a permissive proxy let through (the broker's own rules, for the proxy's super user).
ALLOW_ALL = {
    "acls": [
        {
            "principal": "User:*",
            "host": "*",
            "operation": "ALL",
            "permission_type": "ALLOW",
            "resource_type": rtype,
            "resource_name": name,
            "pattern_type": "LITERAL",
        }
        for rtype, name in (("TOPIC", "*"), ("GROUP", "*"), ("CLUSTER", "kafka-cluster"), ("TRANSACTIONAL_ID", "*"))
    ]
}


class _Warnings(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture(scope="module")
def warnings() -> Iterator[_Warnings]:
    handler = _Warnings()
    logger = logging.getLogger("kafkaguard.node.rollout_watch")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


@pytest.fixture(scope="module")
def permissive(
    kafka: KafkaBroker, tmp_path_factory: pytest.TempPathFactory, warnings: _Warnings
) -> Iterator[ServerHandle]:
    handle = start_proxy(tmp_path_factory.mktemp("permissive"), kafka, enforcement="permissive", audit_mode="all")
    try:
        yield handle
    finally:
        handle.stop()
    assert handle.errors == [], f"the proxy logged errors: {handle.errors}"


def test_permissive_forwards_what_it_would_deny_and_the_denials_equal_simulate(
    permissive: ServerHandle, kafka: KafkaBroker, tmp_path: Path
):
    n, name = Names.fresh(), user(permissive)
    principal = f"User:{name}"
    grant_active(permissive, principal, n)
    seen = traffic(permissive, kafka, name, n)
    # every request reached the broker as the client sent it: A denies the pending produce and the creation
    assert seen["produced"] == [None] * 3 and seen["pending"] == [None]
    assert len(seen["consumed"]) == 3 and seen["created"] == [None] and seen["described"] == [None]
    assert n.created in broker_topics(kafka)

    records = authorization_records(permissive, principal)
    would_be = Counter(key(r) for r in records if r.get("enforced") is False)
    assert all(r["decision"] == "DENIED" for r in records if r.get("enforced") is False)
    assert all(r.get("enforced", True) for r in records if r["decision"] == "ALLOWED")
    assert (principal, "127.0.0.1", "WRITE", "TOPIC", n.pending) in would_be
    assert (principal, "127.0.0.1", "CREATE", "TOPIC", n.created) in would_be
    active = acls_to_document(permissive.services.authorizer.stored_acls())
    flips = simulate(tmp_path / "simulate", records, ALLOW_ALL, active)
    assert {k: c for (k, before, after), c in flips.items() if k[0] == principal} == dict(would_be)
    assert {(before, after) for (k, before, after) in flips if k[0] == principal} == {("ALLOWED", "DENIED")}
    assert permissive.services.rollout.would_be_denials >= sum(would_be.values())


def test_permissive_is_announced_at_start_in_healthz_and_in_metrics(permissive: ServerHandle, warnings: _Warnings):
    assert PERMISSIVE_WARNING in warnings.messages

    async def get() -> tuple[httpx.Response, httpx.Response]:
        transport = httpx.ASGITransport(app=create_app(permissive.services))  # a console in the proxy's process
        async with httpx.AsyncClient(transport=transport, base_url="http://console") as client:
            return await client.get("/healthz"), await client.get("/metrics")

    health, metrics = permissive.run(get())
    assert health.json()["enforcement"] == "permissive"
    assert "kafkaguard_enforcement_permissive 1.0" in metrics.text


def test_permissive_never_opens_kafkaguards_own_apis(permissive: ServerHandle):
    name = user(permissive)
    admin = proxied_admin(permissive, name)
    binding = KafkaAclBinding(KafkaResourceType.TOPIC, "anything", ResourcePatternType.LITERAL, f"User:{name}", "*",
                              KafkaAclOperation.ALL, KafkaAclPermissionType.ALLOW)  # fmt: skip
    codes = outcomes(admin.create_acls([binding], request_timeout=TIMEOUT))
    assert list(codes.values()) == [KafkaError.CLUSTER_AUTHORIZATION_FAILED]
    assert permissive.services.authorizer.acl_count == len(permissive.services.authorizer.stored_acls())
    assert not any(
        acl.binding.entry.principal == f"User:{name}" for acl in permissive.services.authorizer.stored_acls()
    )


def test_shadow_flips_equal_simulate(kafka: KafkaBroker, tmp_path: Path):
    n = Names.fresh()
    directory = tmp_path / "proxy"
    directory.mkdir()
    name = unique("client")
    principal = f"User:{name}"
    shadow = candidate_file(tmp_path / "candidate.yaml", principal, n)
    proxy = start_proxy(directory, kafka, functools.partial(ProxyServer, shadow_loader=load_acl_file),
                        shadow_acls=shadow, audit_mode="all")  # fmt: skip
    try:
        from tests.kafka.proxy.test_proxy_clients import PASSWORD

        proxy.add_user(name, PASSWORD)
        grant_active(proxy, principal, n)
        seen = traffic(proxy, kafka, name, n)
        assert seen["pending"][0] is not None  # enforcing: A's answer stands
        assert seen["created"] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
        envelopes = proxy.audit_envelopes()
        events = [e["data"] for e in envelopes if e["type"] == "io.kafkaguard.shadow.v1"]
        flipped = Counter((key(d), d["decision"], d["shadow_decision"]) for d in events if d["principal"] == principal)
        # the enforcing proxy refused the pending topic at Metadata already: its DESCRIBE is what B would allow
        assert ((principal, "127.0.0.1", "DESCRIBE", "TOPIC", n.pending), "DENIED", "ALLOWED") in flipped
        assert ((principal, "127.0.0.1", "READ", "GROUP", n.group), "ALLOWED", "DENIED") in flipped
        authorization = [e["data"] for e in envelopes if e["type"] == "io.kafkaguard.authorization.v2"]
        records = [r for r in authorization if r["principal"] == principal]
        active = acls_to_document(proxy.services.authorizer.stored_acls())
        candidate = acls_to_document(stored_from_file(load_acl_file(shadow)))
        flips = simulate(tmp_path / "simulate", records, active, candidate)
        assert {k: c for k, c in flips.items() if k[0][0] == principal} == dict(flipped)

        report = CliRunner().invoke(cli, ["audit", "shadow-report", str(proxy.audit_path), "--output", "json",
                                          "--principal", principal])  # fmt: skip
        assert report.exit_code == 0, report.output
        summary = {(f["resource_type"], f["resource_name"], f["direction"]): f["requests"]
                   for f in json.loads(report.stdout)["flips"]}  # fmt: skip
        assert summary[("GROUP", n.group, "newly denied")] == sum(
            c for (k, before, _), c in flipped.items() if k[3:] == ("GROUP", n.group) and before == "ALLOWED"
        )
        assert ("TOPIC", n.pending, "newly allowed") in summary
    finally:
        proxy.stop()
    assert proxy.errors == [], f"the proxy logged errors: {proxy.errors}"
