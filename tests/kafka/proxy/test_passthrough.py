"""Logins passed through (``upstream_authentication: passthrough``), against the real Kafka broker: the broker
decides every login, and every request goes up as the client itself; kafkaguard's ACLs still decide too.

The broker here is this module's own (``plain_kafka``: SCRAM-SHA-256/512 and PLAIN on its SASL_PLAINTEXT listener).
SCRAM users exist only on Kafka, made with its Admin API (AlterUserScramCredentials, through librdkafka); PLAIN users
only in its JAAS configuration. kafkaguard's store holds no user at all but its admin. Each login is tried straight on
the broker and through the proxy with the same raw client (``tests.wire``), and the two answers compared step by step
(error code, error message): right and wrong passwords, an unknown user, a deleted one, a rotated password, both SCRAM
mechanisms, PLAIN. Then producers show both ACL sets at work (both must allow: each refusal as the same client gets
it straight from the broker), and the broker's authorizer log and kafkaguard's audit trail name the client, never the
proxy's service user. Many right logins of one address at once never spend its failure budget; wrong ones do.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import scramp  # type: ignore[import-untyped]
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._acl import AclBinding as KafkaAclBinding
from confluent_kafka.admin._acl import AclOperation as KafkaAclOperation
from confluent_kafka.admin._acl import AclPermissionType as KafkaAclPermissionType
from confluent_kafka.admin._resource import ResourcePatternType
from confluent_kafka.admin._resource import ResourceType as KafkaResourceType
from confluent_kafka.admin._scram import (
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialAlteration,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from confluent_kafka.cimpl import NewTopic
from kio.schema.alter_client_quotas.v1 import request as alter_quotas
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.static.primitive import f64
from typer.testing import CliRunner

from kafkaguard.cli.main import app as cli
from kafkaguard.errors import InvalidConfigError
from kafkaguard.model import AclOperation, ResourceType
from kafkaguard.protocol.passthrough import RelayedAnswer
from kafkaguard.proxy.upstream import UpstreamConnection
from kafkaguard.scram import ScramMechanism as KafkaguardScram
from tests.kafka.broker import ADMIN, ADMIN_PASSWORD, KafkaBroker
from tests.kafka.proxy.conftest import running_broker, running_proxy, start_proxy
from tests.kafka.proxy.test_proxy_clients import grant
from tests.serving import ServerHandle
from tests.wire import Wire

PLAIN_USER, PLAIN_PASSWORD = "plain-client", "plain-client-secret"
TIMEOUT = 30.0
#: The broker's session lifetime (KIP-368): short, so that a test sees clients re-authenticate.
REAUTH_MS = 3000
Answer = tuple[str, int, str | None]  # (the step, its error code, its error message)


@pytest.fixture(scope="module")
def plain_kafka(kafka_dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    with running_broker(kafka_dist, tmp_path_factory.mktemp("passthrough-kafka"),
                        plain_users={PLAIN_USER: PLAIN_PASSWORD},
                        extra_properties=(f"connections.max.reauth.ms={REAUTH_MS}",)) as broker:  # fmt: skip
        yield broker


@pytest.fixture(scope="module")
def passthrough(plain_kafka: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerHandle]:
    """The proxy in passthrough; its service user is the broker's admin (for discovery and broker settings only)."""
    with running_proxy(tmp_path_factory.mktemp("passthrough-proxy"), plain_kafka,
                       upstream_authentication="passthrough",
                       sasl_mechanisms=["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"], sasl_plain_without_tls=True,
                       auth_failure_delay_ms=0) as handle:  # fmt: skip
        yield handle


def admin(kafka: KafkaBroker) -> AdminClient:
    return AdminClient(kafka.client_config())


def set_password(kafka: KafkaBroker, user: str, password: str, *mechanisms: ScramMechanism) -> None:
    """SCRAM credentials made by Kafka's Admin API (AlterUserScramCredentials), on the broker only."""
    for mechanism in mechanisms:  # one alteration per user and request (Kafka: DUPLICATE_RESOURCE)
        alter(kafka, [UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism, 4096), password.encode())])


def alter(kafka: KafkaBroker, changes: list[UserScramCredentialAlteration]) -> None:
    client = admin(kafka)  # kept until the results are in (its handle ends with it)
    for future in client.alter_user_scram_credentials(changes).values():
        future.result(TIMEOUT)


def delete_user(kafka: KafkaBroker, user: str, *mechanisms: ScramMechanism) -> None:
    for mechanism in mechanisms:
        alter(kafka, [UserScramCredentialDeletion(user, mechanism)])


def login(
    address: tuple[str, int], mechanism: str, user: str, password: str, *, source: str | None = None
) -> list[Answer]:
    """Each step's answer, as a raw client sees it, until the login ends (a refusal, or the server's last token);
    from the loopback address ``source`` when given."""
    with Wire(address, timeout=TIMEOUT, source=source) as wire:
        handshake = wire.request(SaslHandshakeRequest(mechanism=mechanism))
        answers: list[Answer] = [("handshake", handshake.error_code.value, None)]
        if handshake.error_code.value:
            return answers
        if mechanism == "PLAIN":
            tokens = iter([f"\x00{user}\x00{password}".encode()])
            client = None
        else:
            client = scramp.ScramClient([mechanism], user, password)
            tokens = iter([client.get_client_first().encode()])
        for step in ("first", "final"):
            token = next(tokens, None)
            if token is None:
                break
            answer = wire.request(SaslAuthenticateRequest(auth_bytes=token))
            answers.append((step, answer.error_code.value, answer.error_message))
            if answer.error_code.value or client is None:
                break
            if step == "first":
                client.set_server_first(bytes(answer.auth_bytes).decode())
                tokens = iter([client.get_client_final().encode()])
            else:
                client.set_server_final(bytes(answer.auth_bytes).decode())  # the broker's proof checks out
        return answers


def both(kafka: KafkaBroker, proxy: ServerHandle, mechanism: str, user: str, password: str) -> list[Answer]:
    """The login straight to the broker and through the proxy: the same answers, step by step."""
    host, port = kafka.bootstrap.split(":")
    direct = login((host, int(port)), mechanism, user, password)
    through = login(proxy.sasl, mechanism, user, password)
    assert through == direct, (mechanism, user)
    return direct


def accepted(answers: list[Answer]) -> bool:
    return all(code == 0 for _step, code, _message in answers) and len(answers) >= 2


def until_broker_agrees(kafka: KafkaBroker, mechanism: str, user: str, password: str, ok: bool) -> None:
    """A credential change is committed before the broker's cache has it: wait until a direct login shows it."""
    host, port = kafka.bootstrap.split(":")
    deadline = time.monotonic() + TIMEOUT
    while accepted(login((host, int(port)), mechanism, user, password)) != ok:
        assert time.monotonic() < deadline, f"the broker never {'accepted' if ok else 'refused'} {user}"
        time.sleep(0.2)  # polling the broker's credential cache, bounded by the deadline


SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512


def test_every_login_is_decided_as_the_broker_decides_it(plain_kafka: KafkaBroker, passthrough: ServerHandle):
    user = f"pt-{uuid.uuid4().hex[:8]}"
    set_password(plain_kafka, user, "first-password", SHA256, SHA512)
    until_broker_agrees(plain_kafka, "SCRAM-SHA-512", user, "first-password", ok=True)
    for kind in KafkaguardScram:  # kafkaguard has never heard of it
        assert passthrough.services.credentials.lookup(user, kind) is None
    outcomes = {}
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        outcomes[f"{mechanism} right"] = both(plain_kafka, passthrough, mechanism, user, "first-password")
        outcomes[f"{mechanism} wrong"] = both(plain_kafka, passthrough, mechanism, user, "not-the-password")
        outcomes[f"{mechanism} unknown"] = both(plain_kafka, passthrough, mechanism, f"ghost-{user}", "whatever")
    outcomes["PLAIN right"] = both(plain_kafka, passthrough, "PLAIN", PLAIN_USER, PLAIN_PASSWORD)
    outcomes["PLAIN wrong"] = both(plain_kafka, passthrough, "PLAIN", PLAIN_USER, "not-the-password")
    outcomes["PLAIN unknown"] = both(plain_kafka, passthrough, "PLAIN", "nobody", PLAIN_PASSWORD)

    set_password(plain_kafka, user, "rotated-password", SHA256, SHA512)  # a rotated password
    until_broker_agrees(plain_kafka, "SCRAM-SHA-256", user, "rotated-password", ok=True)
    outcomes["rotated: old"] = both(plain_kafka, passthrough, "SCRAM-SHA-256", user, "first-password")
    outcomes["rotated: new"] = both(plain_kafka, passthrough, "SCRAM-SHA-256", user, "rotated-password")
    delete_user(plain_kafka, user, SHA256, SHA512)  # a deleted user
    until_broker_agrees(plain_kafka, "SCRAM-SHA-256", user, "rotated-password", ok=False)
    outcomes["deleted"] = both(plain_kafka, passthrough, "SCRAM-SHA-256", user, "rotated-password")

    verdicts = {case: accepted(answers) for case, answers in outcomes.items()}
    assert verdicts == {
        "SCRAM-SHA-256 right": True, "SCRAM-SHA-256 wrong": False, "SCRAM-SHA-256 unknown": False,
        "SCRAM-SHA-512 right": True, "SCRAM-SHA-512 wrong": False, "SCRAM-SHA-512 unknown": False,
        "PLAIN right": True, "PLAIN wrong": False, "PLAIN unknown": False,
        "rotated: old": False, "rotated: new": True, "deleted": False,
    }  # fmt: skip
    # the refusals are Kafka's own words, passed on
    assert outcomes["PLAIN wrong"][-1][2] == "Authentication failed: Invalid username or password"
    assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in str(outcomes["SCRAM-SHA-512 wrong"][-1][2])
    # kafkaguard's audit trail names the principal the broker derived
    logins = [data for category, data in passthrough.audit_events() if category == "authentication"]
    succeeded = {str(data.get("principal")) for data in logins if data.get("principal")}
    assert {f"User:{user}", f"User:{PLAIN_USER}"} <= succeeded


def kafka_allows(kafka: KafkaBroker, principal: str, topic: str, *operations: KafkaAclOperation) -> None:
    bindings = [KafkaAclBinding(KafkaResourceType.TOPIC, topic, ResourcePatternType.LITERAL, principal, "*", op,
                                KafkaAclPermissionType.ALLOW) for op in operations]  # fmt: skip
    client = admin(kafka)
    for future in client.create_acls(bindings).values():
        future.result(TIMEOUT)


def scram_client(proxy: ServerHandle | KafkaBroker, user: str, password: str, **extra: object) -> dict[str, object]:
    """librdkafka's settings for ``user``'s SCRAM-SHA-256 login over SASL_PLAINTEXT, through the proxy or straight to
    the broker, with ``extra`` (keys with dots: pass them as ``**{"linger.ms": 0}``)."""
    if isinstance(proxy, KafkaBroker):
        bootstrap = proxy.bootstrap
    else:
        host, port = proxy.sasl
        bootstrap = f"{host}:{port}"
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": user, "sasl.password": password, **extra}  # fmt: skip


def produce(proxy: ServerHandle | KafkaBroker, user: str, password: str, topic: str) -> KafkaError | None:
    """One message to ``topic`` through the proxy, or straight to the broker: its delivery error, None if it went."""
    producer = Producer(scram_client(proxy, user, password, **{"message.timeout.ms": 10_000, "linger.ms": 0}))
    outcomes: list[KafkaError | None] = []
    producer.produce(topic, b"passed through", on_delivery=lambda err, _msg: outcomes.append(err))
    producer.flush(TIMEOUT)
    assert len(outcomes) == 1
    return outcomes[0]


def broker_principals(kafka: KafkaBroker, topic: str, since: int) -> set[str]:
    """Who the broker's authorizer saw asking about ``topic`` and for what (``User:x WRITE``), in its log from byte
    ``since`` on (``log_end``)."""
    found = set()
    with kafka.authorizer_log.open("rb") as log:
        log.seek(since)
        for line in log.read().decode(errors="replace").splitlines():
            if f"on resource = Topic:LITERAL:{topic} " in line:
                principal = line.split("Principal = ", 1)[1].split(" ", 1)[0]
                found.add(f"{principal} {line.split(' operation = ', 1)[1].split(' ', 1)[0]}")
    return found


def log_end(kafka: KafkaBroker) -> int:
    return kafka.authorizer_log.stat().st_size


def test_both_the_broker_and_kafkaguard_must_allow(plain_kafka: KafkaBroker, passthrough: ServerHandle):
    """Three topics: allowed by the broker only, by kafkaguard only, by both. Through the proxy only the last takes
    the message, and each refusal is the one the same client gets straight from the broker for a topic the broker
    refuses (TOPIC_AUTHORIZATION_FAILED, not retriable, not fatal), whichever side refused."""
    user, password = f"pt-{uuid.uuid4().hex[:8]}", "client-password"
    principal = f"User:{user}"
    set_password(plain_kafka, user, password, SHA256)
    until_broker_agrees(plain_kafka, "SCRAM-SHA-256", user, password, ok=True)
    only_broker, only_kafkaguard, both_allow = (f"{kind}-{uuid.uuid4().hex[:8]}" for kind in
                                                ("only-broker", "only-kafkaguard", "both"))  # fmt: skip
    client = admin(plain_kafka)
    for future in client.create_topics([NewTopic(t, 1, 1) for t in (only_broker, only_kafkaguard,
                                                                                 both_allow)]).values():  # fmt: skip
        future.result(TIMEOUT)
    for topic in (only_broker, both_allow):
        kafka_allows(plain_kafka, principal, topic, KafkaAclOperation.WRITE, KafkaAclOperation.DESCRIBE)
    for topic in (only_kafkaguard, both_allow):
        grant(passthrough, principal, ResourceType.TOPIC, topic, AclOperation.WRITE, AclOperation.DESCRIBE)

    since = log_end(plain_kafka)  # the setup above was the broker's admin's: what follows is the client's traffic
    outcomes: dict[str, Any] = {topic: produce(passthrough, user, password, topic)
                                for topic in (only_broker, only_kafkaguard, both_allow)}  # fmt: skip
    assert outcomes[both_allow] is None
    # the broker saw the client itself, never the proxy's service user; kafkaguard never let it ask for only_broker
    assert broker_principals(plain_kafka, both_allow, since) == {f"{principal} DESCRIBE", f"{principal} WRITE"}
    assert broker_principals(plain_kafka, only_kafkaguard, since) == {f"{principal} DESCRIBE"}  # the broker refused
    assert broker_principals(plain_kafka, only_broker, since) == set()
    # the same client straight to the broker: what Kafka itself answers a topic it refuses
    direct: dict[str, Any] = {topic: produce(plain_kafka, user, password, topic)
                              for topic in (only_broker, only_kafkaguard, both_allow)}  # fmt: skip
    assert direct[only_broker] is None and direct[both_allow] is None
    kafka_refusal = direct[only_kafkaguard]
    assert kafka_refusal is not None and kafka_refusal.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    for refused in (only_broker, only_kafkaguard):  # the refusal Kafka gives, whichever side gave it
        assert outcomes[refused] is not None
        assert (outcomes[refused].code(), outcomes[refused].retriable(), outcomes[refused].fatal()) == (
            kafka_refusal.code(), kafka_refusal.retriable(), kafka_refusal.fatal())  # fmt: skip
    records = [r for r in passthrough.audit_records() if r.get("principal") == principal]
    seen = {(r.get("resource_name"), r.get("decision")) for r in records}
    # kafkaguard's trail tells which side refused: it denied only_broker itself, and allowed only_kafkaguard (the
    # broker refused that one)
    assert (only_broker, "DENIED") in seen and (only_broker, "ALLOWED") not in seen, seen
    assert (only_kafkaguard, "ALLOWED") in seen and (only_kafkaguard, "DENIED") not in seen, seen
    assert (both_allow, "ALLOWED") in seen and (both_allow, "DENIED") not in seen, seen
    # ... and says so: the broker's refusal of only_kafkaguard (its answer to the client's Metadata) is an event of
    # its own, once however often the client asked, with the broker's error; none for the other two
    refusals = [e for e in passthrough.audit_envelopes()
                if e["type"] == "io.kafkaguard.broker.v1" and e["data"]["principal"] == principal]  # fmt: skip
    assert [(e["data"]["resource_name"], e["data"]["decision"], e["data"]["broker_error"]) for e in refusals] == [
        (only_kafkaguard, "ALLOWED", "TOPIC_AUTHORIZATION_FAILED")
    ], refusals
    counted = passthrough.services.broker_refusals.counts()
    assert sum(n for kind, n in counted.items() if kind.error == "TOPIC_AUTHORIZATION_FAILED") >= 1, counted
    # and explain, from the proxy's own audit log, says which side refused
    explained = CliRunner().invoke(cli, ["explain", "--from-audit", str(passthrough.audit_path), "--event",
                                         refusals[0]["id"], "--data-dir", str(passthrough.data_dir)])  # fmt: skip
    assert explained.exit_code == 0, explained.output
    assert f"{principal} from 127.0.0.1: DESCRIBE on TOPIC:{only_kafkaguard} (Metadata)" in explained.output
    assert "logged   ALLOWED by MatchingAcl(" in explained.output, explained.output
    assert (
        "the broker refused with TOPIC_AUTHORIZATION_FAILED (its own ACLs: in passthrough both must allow)"
        in explained.output
    ), explained.output


def test_a_write_the_broker_refuses_is_its_refusal_in_the_trail(plain_kafka: KafkaBroker, passthrough: ServerHandle):
    """A topic the broker lets the client see but not write, and kafkaguard lets it write: the client's Produce
    reaches the broker (Metadata passed), which answers TOPIC_AUTHORIZATION_FAILED; the client gets that answer as
    Kafka gives it straight, and kafkaguard's trail has the broker's refusal of the write (the Produce answer, read
    on the fast path), next to its own ALLOWED."""
    user, password = f"pt-{uuid.uuid4().hex[:8]}", "client-password"
    principal = f"User:{user}"
    set_password(plain_kafka, user, password, SHA256)
    until_broker_agrees(plain_kafka, "SCRAM-SHA-256", user, password, ok=True)
    topic = f"see-only-{uuid.uuid4().hex[:8]}"
    client = admin(plain_kafka)  # kept until the result is in (its handle ends with it)
    client.create_topics([NewTopic(topic, 1, 1)])[topic].result(TIMEOUT)
    kafka_allows(plain_kafka, principal, topic, KafkaAclOperation.DESCRIBE)
    grant(passthrough, principal, ResourceType.TOPIC, topic, AclOperation.WRITE, AclOperation.DESCRIBE)
    since = log_end(plain_kafka)
    proxied = produce(passthrough, user, password, topic)
    direct = produce(plain_kafka, user, password, topic)
    assert direct is not None and direct.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert proxied is not None
    assert (proxied.code(), proxied.retriable(), proxied.fatal()) == (direct.code(), direct.retriable(), direct.fatal())
    assert f"{principal} WRITE" in broker_principals(plain_kafka, topic, since)  # the broker decided the write
    refusals = [(e["data"]["api"], e["data"]["operation"], e["data"]["broker_error"])
                for e in passthrough.audit_envelopes()
                if e["type"] == "io.kafkaguard.broker.v1" and e["data"]["resource_name"] == topic]  # fmt: skip
    assert refusals == [("Produce", "WRITE", "TOPIC_AUTHORIZATION_FAILED")], refusals


def read_error(proxy: ServerHandle | KafkaBroker, user: str, password: str, topic: str) -> KafkaError | None:
    """The first error of a consumer assigned ``topic``'s partition 0 from its start (librdkafka: ListOffsets, then
    Fetch), through the proxy or straight to the broker, but for its group's (it has no grant for one); None when it
    reads a message first."""
    group = {"group.id": f"unused-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False}
    consumer = Consumer(scram_client(proxy, user, password, **group))
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None:
                continue
            error: KafkaError | None = message.error()
            if error is not None and error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
                continue  # librdkafka looks its group's coordinator up even when assigned: not the read's error
            return error
    finally:
        consumer.close()
    raise AssertionError(f"no message and no error from {topic} in {TIMEOUT} s")


def test_a_read_the_broker_refuses_is_its_refusal_in_the_trail(plain_kafka: KafkaBroker, passthrough: ServerHandle):
    """A topic the broker lets the client see but not read, and kafkaguard lets it read: the client's Fetch (v16,
    librdkafka's) reaches the broker, which answers its partition TOPIC_AUTHORIZATION_FAILED; the client gets that as
    straight from Kafka, and kafkaguard's trail has the broker's refusal (found while the answer streamed through)."""
    user, password = f"pt-{uuid.uuid4().hex[:8]}", "client-password"
    principal = f"User:{user}"
    set_password(plain_kafka, user, password, SHA256)
    until_broker_agrees(plain_kafka, "SCRAM-SHA-256", user, password, ok=True)
    topic = f"see-only-{uuid.uuid4().hex[:8]}"
    client = admin(plain_kafka)
    client.create_topics([NewTopic(topic, 1, 1)])[topic].result(TIMEOUT)
    kafka_allows(plain_kafka, principal, topic, KafkaAclOperation.DESCRIBE)
    grant(passthrough, principal, ResourceType.TOPIC, topic, AclOperation.READ, AclOperation.DESCRIBE)
    since = log_end(plain_kafka)
    proxied = read_error(passthrough, user, password, topic)
    direct = read_error(plain_kafka, user, password, topic)
    assert direct is not None and direct.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert proxied is not None and proxied.code() == direct.code()
    assert f"{principal} READ" in broker_principals(plain_kafka, topic, since)  # the broker decided the read
    refusals = [(e["data"]["api"], e["data"]["operation"], e["data"]["broker_error"])
                for e in passthrough.audit_envelopes()
                if e["type"] == "io.kafkaguard.broker.v1" and e["data"]["resource_name"] == topic]  # fmt: skip
    assert refusals == [("Fetch", "READ", "TOPIC_AUTHORIZATION_FAILED")], refusals


def test_a_broker_login_never_rides_on_the_service_account(plain_kafka: KafkaBroker, passthrough: ServerHandle):
    """kafkaguard's own admin logs in through the proxy, too, as the broker's admin (same name and password there):
    a user only kafkaguard knows cannot log in at all."""
    passthrough.add_user("only-in-kafkaguard", "its-password")
    answers = login(passthrough.sasl, "SCRAM-SHA-256", "only-in-kafkaguard", "its-password")
    assert not accepted(answers)
    assert accepted(login(passthrough.sasl, "SCRAM-SHA-512", ADMIN, ADMIN_PASSWORD))


def test_a_session_re_authenticates_through_to_the_broker(
    plain_kafka: KafkaBroker, passthrough: ServerHandle, renewals: list[str]
):
    """The broker gives sessions a lifetime (connections.max.reauth.ms): the proxy passes it on, the client
    re-authenticates before it ends (KIP-368), and the proxy relays that on the same upstream connection."""
    user, password = f"pt-{uuid.uuid4().hex[:8]}", "reauth-password"
    set_password(plain_kafka, user, password, SHA256)
    until_broker_agrees(plain_kafka, "SCRAM-SHA-256", user, password, ok=True)
    topic = f"reauth-{uuid.uuid4().hex[:8]}"
    client = admin(plain_kafka)
    client.create_topics([NewTopic(topic, 1, 1)])[topic].result(TIMEOUT)
    kafka_allows(plain_kafka, f"User:{user}", topic, KafkaAclOperation.WRITE, KafkaAclOperation.DESCRIBE)
    grant(passthrough, f"User:{user}", ResourceType.TOPIC, topic, AclOperation.WRITE, AclOperation.DESCRIBE)
    producer = Producer(scram_client(passthrough, user, password, **{"linger.ms": 0}))
    outcomes: list[KafkaError | None] = []
    deadline = time.monotonic() + 3 * REAUTH_MS / 1000
    while time.monotonic() < deadline:  # produce across more than two session lifetimes
        producer.produce(topic, b"again", on_delivery=lambda err, _msg: outcomes.append(err))
        producer.flush(TIMEOUT)
        time.sleep(0.5)  # pacing the producer across the sessions' lifetimes
    assert outcomes and all(err is None for err in outcomes), outcomes
    assert renewals and set(renewals) == {"SCRAM-SHA-256"}


def test_a_mechanism_the_broker_does_not_enable_stops_the_proxy_at_start(kafka: KafkaBroker, tmp_path: Path):
    """``kafka`` (the session's broker) enables SCRAM only: passing PLAIN through to it cannot work, and the proxy
    says so at start, from the broker's own SaslHandshake answer."""
    with pytest.raises(InvalidConfigError) as failure:
        start_proxy(tmp_path, kafka, upstream_authentication="passthrough", sasl_plain_without_tls=True,
                    sasl_mechanisms=["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"])  # fmt: skip
    message = str(failure.value)
    assert "the broker does not enable PLAIN (it offers SCRAM-SHA-512, SCRAM-SHA-256)" in message
    assert ADMIN_PASSWORD not in message


def broker_quota(kafka: KafkaBroker, user: str, producer_byte_rate: int) -> None:
    """A user quota set on the broker itself (AlterClientQuotas as its admin, straight to the broker)."""
    entry = alter_quotas.EntryData(
        entity=(alter_quotas.EntityData(entity_type="user", entity_name=user),),
        ops=(alter_quotas.OpData(key="producer_byte_rate", value=f64(float(producer_byte_rate)), remove=False),),
    )
    with Wire(("127.0.0.1", kafka.port), timeout=TIMEOUT) as wire:
        wire.login(ADMIN, ADMIN_PASSWORD)
        answer = wire.request(alter_quotas.AlterClientQuotasRequest(entries=(entry,), validate_only=False))
    assert [e.error_code.value for e in answer.entries] == [0], answer


def throttles_seen(proxy: ServerHandle, user: str, password: str, topic: str, rounds: int) -> list[int]:
    """The throttle times (ms) the broker's Produce answers carried to ``user``'s producer through the proxy, over
    ``rounds`` rounds of 64 messages of 16 KiB (1 MiB a round), each round flushed."""
    throttles: list[int] = []
    producer = Producer(scram_client(proxy, user, password, **{
        "linger.ms": 5, "throttle_cb": lambda event: throttles.append(event.throttle_time),
        "message.timeout.ms": 60_000}))  # fmt: skip
    outcomes: list[KafkaError | None] = []
    for _ in range(rounds):
        for _ in range(64):
            producer.produce(topic, bytes(16 * 1024), on_delivery=lambda err, _msg: outcomes.append(err))
        producer.flush(TIMEOUT)
        producer.poll(0)  # throttle callbacks are served by poll
    assert outcomes == [None] * 64 * rounds
    return throttles


def test_a_broker_quota_throttles_that_user_through_the_proxy_and_no_one_else(
    plain_kafka: KafkaBroker, passthrough: ServerHandle
):
    """Each client is upstream as itself: a producer_byte_rate the broker holds for one user throttles that user's
    produce through the proxy (the broker's own throttle_time_ms, KIP-219), and another user's not at all."""
    slow, free = (f"pt-quota-{kind}-{uuid.uuid4().hex[:6]}" for kind in ("slow", "free"))
    password = f"quota-{uuid.uuid4().hex[:8]}"
    topic = f"quota-{uuid.uuid4().hex[:8]}"
    client = admin(plain_kafka)  # kept until the result is in (its handle ends with it)
    client.create_topics([NewTopic(topic, 1, 1)])[topic].result(TIMEOUT)
    for user in (slow, free):
        set_password(plain_kafka, user, password, SHA256)
        until_broker_agrees(plain_kafka, "SCRAM-SHA-256", user, password, ok=True)
        kafka_allows(plain_kafka, f"User:{user}", topic, KafkaAclOperation.WRITE, KafkaAclOperation.DESCRIBE)
        grant(passthrough, f"User:{user}", ResourceType.TOPIC, topic, AclOperation.WRITE, AclOperation.DESCRIBE)
    broker_quota(plain_kafka, slow, 256 * 1024)  # 256 KiB/s against 1 MiB a round
    time.sleep(1.0)  # the broker applies a quota the controller committed asynchronously (a few ms here)
    assert any(t > 0 for t in throttles_seen(passthrough, slow, password, topic, rounds=3))
    assert throttles_seen(passthrough, free, password, topic, rounds=3) == []


CONCURRENT = 200
THROTTLED = re.compile(r"^Authentication failed: Too many failed logins .*retry after \d+ s$")
#: The budget's defaults (``login_failures_per_address_burst``, ``…_per_user_burst``), which ``budgeted`` keeps
#: (the tests' servers are otherwise given bursts too large to reach).
ADDRESS_BURST, USER_BURST = 10, 20


@pytest.fixture(scope="module")
def budgeted(plain_kafka: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerHandle]:
    """The proxy in passthrough with the default failure budget."""
    with running_proxy(tmp_path_factory.mktemp("budgeted-proxy"), plain_kafka,
                       upstream_authentication="passthrough",
                       sasl_mechanisms=["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"], sasl_plain_without_tls=True,
                       auth_failure_delay_ms=0, login_failures_per_address_burst=ADDRESS_BURST,
                       login_failures_per_user_burst=USER_BURST) as handle:  # fmt: skip
        yield handle


def login_at_once(
    proxy: ServerHandle, source: str, mechanism: str, user: str, password: str, count: int
) -> list[tuple[int, str | None]]:
    """``count`` logins from ``source``, each on its own connection, their proofs (PLAIN's one token, SCRAM's
    client-final) sent at the same moment: (error code, error message) of each login's last step."""
    gate = threading.Barrier(count, timeout=TIMEOUT)

    def one(_number: int) -> tuple[int, str | None]:
        with Wire(proxy.sasl, timeout=TIMEOUT, source=source) as wire:
            assert wire.request(SaslHandshakeRequest(mechanism=mechanism)).error_code.value == 0
            if mechanism == "PLAIN":
                proof = f"\x00{user}\x00{password}".encode()
            else:
                client = scramp.ScramClient([mechanism], user, password)
                first = wire.request(SaslAuthenticateRequest(auth_bytes=client.get_client_first().encode()))
                assert first.error_code.value == 0, first.error_message
                client.set_server_first(bytes(first.auth_bytes).decode())
                proof = client.get_client_final().encode()
            gate.wait()
            answer = wire.request(SaslAuthenticateRequest(auth_bytes=proof))
            return answer.error_code.value, answer.error_message

    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(one, range(count)))


@pytest.fixture
def slow_broker(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every relayed login waits a moment before it goes up (a broker slower than its clients), so that the logins
    sent at once are all in flight together."""
    real = UpstreamConnection.relay_login

    async def slow(self: UpstreamConnection, mechanism: str, token: bytes, *, first: bool) -> RelayedAnswer:
        await asyncio.sleep(0.5)  # widens the window in which logins are in flight; no timing is asserted
        return await real(self, mechanism, token, first=first)

    monkeypatch.setattr(UpstreamConnection, "relay_login", slow)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_right_logins_in_flight_at_once_never_spend_the_failure_budget(
    plain_kafka: KafkaBroker, budgeted: ServerHandle, slow_broker: None, mechanism: str
):
    """200 right logins from one address at once, all waiting for the broker together: every one is accepted (held
    budget tokens refused 83 of 200 PLAIN logins in a benchmark: the address's burst was spent by logins in flight).
    Wrong passwords from that address still spend its budget: after the burst the next login is refused in front."""
    source = {"PLAIN": "127.0.21.1", "SCRAM-SHA-256": "127.0.21.2", "SCRAM-SHA-512": "127.0.21.3"}[mechanism]
    if mechanism == "PLAIN":
        user, password = PLAIN_USER, PLAIN_PASSWORD
    else:
        user, password = f"pt-{uuid.uuid4().hex[:8]}", "many-at-once"
        set_password(plain_kafka, user, password, SHA256 if mechanism == "SCRAM-SHA-256" else SHA512)
        until_broker_agrees(plain_kafka, mechanism, user, password, ok=True)
    outcomes = login_at_once(budgeted, source, mechanism, user, password, CONCURRENT)
    assert [code for code, _message in outcomes] == [0] * CONCURRENT, [o for o in outcomes if o[0]][:3]
    # wrong passwords, one after another, for names never seen from there: the broker refuses each, and each spends
    # a failed login of the address, until the budget refuses in front (the bucket refills 30 a minute meanwhile)
    checked = 0
    while not THROTTLED.match(str(login(budgeted.sasl, mechanism, f"ghost-{checked}-{user}", "wrong",
                                        source=source)[-1][2])):  # fmt: skip
        checked += 1
        assert checked <= 4 * ADDRESS_BURST, "wrong passwords never spent the budget"
    assert checked >= ADDRESS_BURST  # the right logins before took nothing from it
    assert login(budgeted.sasl, mechanism, user, password, source=source)[-1][1] == 0  # a known pair still may
