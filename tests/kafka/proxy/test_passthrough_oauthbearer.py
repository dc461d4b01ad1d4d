"""OAUTHBEARER logins passed through (``upstream_authentication: passthrough``), against the real Kafka 3.9 broker:
its own ``OAuthBearerValidatorCallbackHandler`` with a ``file:`` JWKS decides every token, and every request goes up
as the token's subject.

The broker is this module's own (``oauth_kafka``): its SASL_PLAINTEXT listener enables OAUTHBEARER beside SCRAM
(the proxy's service account logs in with SCRAM there; the clients' tokens go to the same listener). kafkaguard has
no JWKS at all. The same tokens — valid, expired, wrong audience, wrong signature, unknown kid, no subject — are
tried straight on the broker and through the proxy with one raw client (``tests.wire``), and the two exchanges
compared step by step (error code, error message, the broker's challenge). Then a confluent-kafka producer with a
static token writes through the proxy: the broker's authorizer log and kafkaguard's audit trail both name the
token's subject (never the proxy's service account), and kafkaguard's ACL on the token's group lets it. At start,
the proxy refuses a broker whose ``sasl.oauthbearer.sub.claim.name`` is not kafkaguard's, and one without
OAUTHBEARER.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._acl import AclOperation as KafkaAclOperation
from confluent_kafka.cimpl import NewTopic
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from kafkaguard.errors import InvalidConfigError
from kafkaguard.model import AclOperation, ResourceType
from tests.kafka.broker import ADMIN_PASSWORD, KafkaBroker, OAuthBearerValidation
from tests.kafka.proxy.conftest import running_broker, running_proxy, start_proxy
from tests.kafka.proxy.test_passthrough import broker_principals, kafka_allows, log_end
from tests.kafka.proxy.test_proxy_clients import grant
from tests.kafka.tokens import SigningKey, write_jwks
from tests.serving import ServerHandle
from tests.wire import Wire

TIMEOUT = 30.0
#: The broker's session lifetime (KIP-368): short, so that a test sees clients re-authenticate with their token.
REAUTH_MS = 3000
AUDIENCE, ISSUER = "kafka", "https://issuer.passthrough.test"
#: One exchange as a raw client sees it: (the step, its error code, its error message, the server's bytes).
Answer = tuple[str, int, str | None, bytes]


def oauthbearer_properties(jwks: Path) -> tuple[str, ...]:
    """The SASL_PLAINTEXT listener with OAUTHBEARER beside SCRAM (a later line of server.properties wins)."""
    validation = OAuthBearerValidation(jwks, expected_audience=(AUDIENCE,), expected_issuer=ISSUER)
    return (*validation.properties("SASL_PLAINTEXT"),
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
            f"connections.max.reauth.ms={REAUTH_MS}")  # fmt: skip


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> tuple[SigningKey, Path]:
    key = SigningKey.create("passthrough-key")
    return key, write_jwks(tmp_path_factory.mktemp("passthrough-jwks") / "jwks.json", [key])


@pytest.fixture(scope="module")
def oauth_kafka(
    kafka_dist: Path, tmp_path_factory: pytest.TempPathFactory, keys: tuple[SigningKey, Path]
) -> Iterator[KafkaBroker]:
    with running_broker(kafka_dist, tmp_path_factory.mktemp("passthrough-oauth-kafka"),
                        extra_properties=oauthbearer_properties(keys[1])) as broker:  # fmt: skip
        yield broker


@pytest.fixture(scope="module")
def passthrough(oauth_kafka: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerHandle]:
    """The proxy in passthrough, without any JWKS; the token's ``groups`` claim names the session's groups."""
    with running_proxy(tmp_path_factory.mktemp("passthrough-oauth-proxy"), oauth_kafka,
                       upstream_authentication="passthrough", sasl_mechanisms=["SCRAM-SHA-512", "OAUTHBEARER"],
                       sasl_oauthbearer_groups_claim_name="groups", auth_failure_delay_ms=0) as handle:  # fmt: skip
        yield handle


def initial_response(token: str) -> bytes:
    return f"n,,\x01auth=Bearer {token}\x01\x01".encode()


def login(address: tuple[str, int], token: str) -> list[Answer]:
    """Each step's answer until the login ends: a refusal, the broker's acceptance, or its error challenge and the
    answer to the client's ``%x01`` (as Kafka's clients send it)."""
    with Wire(address, timeout=TIMEOUT) as wire:
        handshake = wire.request(SaslHandshakeRequest(mechanism="OAUTHBEARER"))
        answers: list[Answer] = [("handshake", handshake.error_code.value, None, b"")]
        if handshake.error_code.value:
            return answers
        answer = wire.request(SaslAuthenticateRequest(auth_bytes=initial_response(token)))
        answers.append(("token", answer.error_code.value, answer.error_message, bytes(answer.auth_bytes)))
        if answer.error_code.value == 0 and bytes(answer.auth_bytes):  # the error challenge
            answer = wire.request(SaslAuthenticateRequest(auth_bytes=b"\x01"))
            answers.append(("acknowledgement", answer.error_code.value, answer.error_message, bytes(answer.auth_bytes)))
        return answers


def both(kafka: KafkaBroker, proxy: ServerHandle, token: str) -> list[Answer]:
    """The login straight to the broker and through the proxy: the same answers, step by step."""
    host, port = kafka.bootstrap.split(":")
    direct = login((host, int(port)), token)
    through = login(proxy.sasl, token)
    assert through == direct
    return direct


def accepted(answers: list[Answer]) -> bool:
    return len(answers) == 2 and all(code == 0 for _step, code, _message, _bytes in answers) and not answers[1][3]


def test_every_token_is_decided_as_the_broker_decides_it(
    oauth_kafka: KafkaBroker, passthrough: ServerHandle, keys: tuple[SigningKey, Path]
) -> None:
    key, _jwks = keys
    forger = SigningKey("passthrough-key", SigningKey.create("x").private_key)  # the broker's kid, another key
    stranger = SigningKey.create("unknown-kid")
    subject = f"svc-{uuid.uuid4().hex[:8]}"
    claims: dict[str, Any] = {"aud": AUDIENCE, "iss": ISSUER}
    tokens = {
        "valid": key.sign(subject, **claims),
        "valid with groups": key.sign(subject, groups=["writers"], **claims),
        "expired": key.sign(subject, now=time.time() - 3600, lifetime=60, **claims),
        "wrong audience": key.sign(subject, aud="not-kafka", iss=ISSUER),
        "wrong issuer": key.sign(subject, aud=AUDIENCE, iss="https://elsewhere.test"),
        "wrong signature": forger.sign(subject, **claims),
        "unknown kid": stranger.sign(subject, **claims),
        "no subject": key.sign(subject, sub=None, **claims),
        "not a jwt": "not-a-jwt",
    }
    outcomes = {case: both(oauth_kafka, passthrough, token) for case, token in tokens.items()}
    verdicts = {case: accepted(answers) for case, answers in outcomes.items()}
    assert verdicts == {"valid": True, "valid with groups": True, "expired": False, "wrong audience": False,
                        "wrong issuer": False, "wrong signature": False, "unknown kid": False,
                        "no subject": False, "not a jwt": False}  # fmt: skip
    # each refusal is Kafka's exchange: its challenge, then its refusal of the client's %x01, passed on as it came
    for case in ("expired", "wrong audience", "wrong signature", "unknown kid"):
        assert [step for step, *_ in outcomes[case]] == ["handshake", "token", "acknowledgement"], case
        assert outcomes[case][1][3] == b'{"status":"invalid_token"}', case
        assert outcomes[case][2][1] != 0, case
    # kafkaguard's audit trail names the principal the broker derived, and never the token
    events = [data for category, data in passthrough.audit_events() if category == "authentication"]
    assert f"User:{subject}" in {str(data.get("principal")) for data in events if data.get("principal")}
    audit_text = repr(events)
    assert not any(token in audit_text for token in tokens.values() if len(token) > 20)


def test_a_client_s_requests_reach_the_broker_as_the_token_s_subject(
    oauth_kafka: KafkaBroker, passthrough: ServerHandle, keys: tuple[SigningKey, Path]
) -> None:
    key, _jwks = keys
    subject = f"app-{uuid.uuid4().hex[:8]}"
    principal = f"User:{subject}"
    token = key.sign(subject, lifetime=600, aud=AUDIENCE, iss=ISSUER, groups=["writers"])
    topic = f"oauth-pt-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(oauth_kafka.client_config())
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(TIMEOUT)
    kafka_allows(oauth_kafka, principal, topic, KafkaAclOperation.WRITE, KafkaAclOperation.DESCRIBE)
    # kafkaguard allows the token's group, not the user: the groups claim counts
    grant(passthrough, "Group:writers", ResourceType.TOPIC, topic, AclOperation.WRITE, AclOperation.DESCRIBE)

    since = log_end(oauth_kafka)
    host, port = passthrough.sasl
    producer = Producer({"bootstrap.servers": f"{host}:{port}", "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanisms": "OAUTHBEARER", "oauth_cb": lambda _config: (token, time.time() + 600),
                         "message.timeout.ms": 10_000, "linger.ms": 0})  # fmt: skip
    outcomes: list[KafkaError | None] = []
    producer.produce(topic, b"as myself", on_delivery=lambda err, _msg: outcomes.append(err))
    producer.flush(TIMEOUT)
    assert outcomes == [None]
    # the broker saw the token's subject, never the proxy's service account (User:admin)
    assert broker_principals(oauth_kafka, topic, since) == {f"{principal} DESCRIBE", f"{principal} WRITE"}
    records: list[dict[str, Any]] = [r for r in passthrough.audit_records() if r.get("resource_name") == topic]
    assert records and {r.get("principal") for r in records} == {principal}
    assert {(r["api"], r["decision"]) for r in records} >= {("Produce", "ALLOWED")}, records
    assert all(r.get("login_groups") == ["Group:writers"] and "Group:writers" in r["rule"] for r in records)


def test_a_token_session_re_authenticates_through_to_the_broker(
    oauth_kafka: KafkaBroker, passthrough: ServerHandle, keys: tuple[SigningKey, Path], renewals: list[str]
) -> None:
    """The broker bounds the session (connections.max.reauth.ms): the proxy passes the lifetime on, librdkafka
    re-authenticates with its token before it ends (KIP-368), and the proxy relays that on the same upstream
    connection: producing goes on across several lifetimes."""
    key, _jwks = keys
    subject = f"reauth-{uuid.uuid4().hex[:8]}"
    token = key.sign(subject, lifetime=600, aud=AUDIENCE, iss=ISSUER)
    topic = f"oauth-reauth-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(oauth_kafka.client_config())  # kept until the result is in (its handle ends with it)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(TIMEOUT)
    kafka_allows(oauth_kafka, f"User:{subject}", topic, KafkaAclOperation.WRITE, KafkaAclOperation.DESCRIBE)
    grant(passthrough, f"User:{subject}", ResourceType.TOPIC, topic, AclOperation.WRITE, AclOperation.DESCRIBE)
    host, port = passthrough.sasl
    producer = Producer({"bootstrap.servers": f"{host}:{port}", "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanisms": "OAUTHBEARER", "oauth_cb": lambda _config: (token, time.time() + 600),
                         "linger.ms": 0})  # fmt: skip
    outcomes: list[KafkaError | None] = []
    deadline = time.monotonic() + 3 * REAUTH_MS / 1000
    while time.monotonic() < deadline:  # produce across more than two session lifetimes
        producer.produce(topic, b"again", on_delivery=lambda err, _msg: outcomes.append(err))
        producer.flush(TIMEOUT)
        time.sleep(0.5)  # pacing the producer across the sessions' lifetimes
    assert outcomes and all(err is None for err in outcomes), outcomes
    assert renewals and set(renewals) == {"OAUTHBEARER"}


def test_a_broker_naming_principals_by_another_claim_stops_the_proxy_at_start(
    oauth_kafka: KafkaBroker, tmp_path: Path
) -> None:
    with pytest.raises(InvalidConfigError) as failure:
        start_proxy(tmp_path, oauth_kafka, upstream_authentication="passthrough",
                    sasl_mechanisms=["SCRAM-SHA-512", "OAUTHBEARER"],
                    sasl_oauthbearer_sub_claim_name="email")  # fmt: skip
    message = str(failure.value)
    assert "broker 1 names them by the token's 'sub' claim (sasl.oauthbearer.sub.claim.name), kafkaguard by " \
           "'email'" in message  # fmt: skip
    assert "set sasl_oauthbearer_sub_claim_name: sub" in message and ADMIN_PASSWORD not in message


def test_a_broker_without_oauthbearer_stops_the_proxy_at_start(kafka: KafkaBroker, tmp_path: Path) -> None:
    """``kafka`` (the session's broker) enables SCRAM only."""
    with pytest.raises(InvalidConfigError) as failure:
        start_proxy(tmp_path, kafka, upstream_authentication="passthrough",
                    sasl_mechanisms=["SCRAM-SHA-512", "OAUTHBEARER"])  # fmt: skip
    assert "the broker does not enable OAUTHBEARER (it offers SCRAM-SHA-512, SCRAM-SHA-256)" in str(failure.value)
