"""Client quotas (KIP-546), differentially: the same DescribeClientQuotas / AlterClientQuotas requests (and Kafka's
own kafka-configs) against the real Kafka broker and against kafkaguard. AlterClientQuotas answers are compared
exactly, order included (kafkaguard reproduces the Java HashMap orders that decide it); DescribeClientQuotas
answers with entries, entity components and values as sorted lists (Kafka's order there comes from its metadata
image's HashMap history), and kafka-configs' describe output with its lines sorted (printed in the order of the
admin client's HashMap): semantics.md: "DescribeClientQuotas lists its entries sorted by entity".
Nothing else is normalized: error codes and messages are Kafka's, word for word.

The broker applies an alteration in its controller and learns it a moment later, so a describe on Kafka is retried
until it agrees (or the deadline passes, and the last answers are compared).
"""

from __future__ import annotations

import math
import re
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._scram import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
from kio.schema.alter_client_quotas.v0 import request as alter_v0
from kio.schema.alter_client_quotas.v1 import request as alter_v1
from kio.schema.describe_client_quotas.v0 import request as describe_v0
from kio.schema.describe_client_quotas.v1 import request as describe_v1
from kio.static.primitive import f64, i8

from kafkaguard.config import SecurityProtocol
from tests.actors import ACTOR
from tests.kafka.broker import ADMIN, ADMIN_PASSWORD, KafkaBroker
from tests.serving import ServerHandle, sasl_server
from tests.wire import Wire

OUTSIDER = "quota-outsider"
OUTSIDER_PASSWORD = "outsider-secret"  # noqa: S105 - a test password
SETTLE_SECONDS = 10.0

Entity = Sequence[tuple[str, str | None]]
Op = tuple[str, float | None]  # (key, value); None removes


@pytest.fixture(scope="module")
def guard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerHandle]:
    with sasl_server(tmp_path_factory.mktemp("kafkaguard-quotas")) as handle:
        yield handle


@pytest.fixture(scope="module")
def outsider(kafka: KafkaBroker, guard: ServerHandle) -> str:
    """A SCRAM user without any ACL, on both."""
    admin = AdminClient({
        "bootstrap.servers": kafka.bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": ADMIN, "sasl.password": ADMIN_PASSWORD,
    })  # fmt: skip
    upsertion = UserScramCredentialUpsertion(
        OUTSIDER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), OUTSIDER_PASSWORD.encode()
    )
    for future in admin.alter_user_scram_credentials([upsertion]).values():
        future.result(timeout=30)
    result = guard.services.credentials.upsert_password(OUTSIDER, 1, OUTSIDER_PASSWORD, 4096, actor=ACTOR)
    assert result.succeeded, result
    return OUTSIDER


class Pair:
    """One logged-in connection to each side."""

    def __init__(self, kafka: KafkaBroker, guard: ServerHandle, user: str = ADMIN, password: str = ADMIN_PASSWORD):
        self.kafka = Wire(("127.0.0.1", kafka.port), timeout=30)
        self.guard = Wire(guard.address(SecurityProtocol.SASL_PLAINTEXT), timeout=30)
        for wire in (self.kafka, self.guard):
            wire.login(user, password)

    def close(self) -> None:
        self.kafka.close()
        self.guard.close()

    def alter(self, entries: Sequence[tuple[Entity, Sequence[Op]]], *, validate_only: bool = False, version: int = 1):
        """The same AlterClientQuotas to both; their normalized answers, asserted equal."""
        body = alter_request(entries, validate_only=validate_only, version=version)
        theirs, ours = alter_answer(self.kafka.request(body)), alter_answer(self.guard.request(body))
        assert ours == theirs
        return ours

    def describe(self, components: Sequence[tuple[str, int, str | None]], *, strict: bool = False, version: int = 1):
        """The same DescribeClientQuotas to both; Kafka's retried until it agrees or SETTLE_SECONDS pass."""
        body = describe_request(components, strict=strict, version=version)
        ours = normalize_describe(self.guard.request(body))
        deadline = time.monotonic() + SETTLE_SECONDS
        while True:
            theirs = normalize_describe(self.kafka.request(body))
            if theirs == ours or time.monotonic() > deadline:
                break
            time.sleep(0.1)  # the broker learns the controller's change asynchronously
        assert ours == theirs
        return ours


@pytest.fixture
def pair(kafka: KafkaBroker, guard: ServerHandle) -> Iterator[Pair]:
    both = Pair(kafka, guard)
    try:
        yield both
    finally:
        both.close()


def alter_request(entries: Sequence[tuple[Entity, Sequence[Op]]], *, validate_only: bool, version: int) -> Any:
    schema: Any = alter_v1 if version == 1 else alter_v0
    return schema.AlterClientQuotasRequest(
        entries=tuple(
            schema.EntryData(
                entity=tuple(schema.EntityData(entity_type=t, entity_name=n) for t, n in entity),
                ops=tuple(
                    schema.OpData(key=key, value=f64(0.0 if value is None else float(value)), remove=value is None)
                    for key, value in ops
                ),
            )
            for entity, ops in entries
        ),
        validate_only=validate_only,
    )


def describe_request(components: Sequence[tuple[str, int, str | None]], *, strict: bool, version: int) -> Any:
    schema: Any = describe_v1 if version == 1 else describe_v0
    return schema.DescribeClientQuotasRequest(
        components=tuple(
            schema.ComponentData(entity_type=t, match_type=i8(match_type), match=match)
            for t, match_type, match in components
        ),
        strict=strict,
    )


def _entity(entities: Any) -> tuple[tuple[str, str | None], ...]:
    return tuple(sorted(((e.entity_type, e.entity_name) for e in entities), key=lambda p: (p[0], p[1] or "")))


def _value(value: float) -> float | str:
    return "NaN" if math.isnan(value) else float(value)


def alter_answer(response: Any) -> list[tuple[Any, ...]]:
    """(entity, error code, message) per entry, exactly in the order sent: kafkaguard reproduces the order of
    Kafka's HashMaps (entries, entity components) rather than normalizing it away."""
    return [
        (tuple((x.entity_type, x.entity_name) for x in e.entity), int(e.error_code.value), e.error_message)
        for e in response.entries
    ]


def normalize_describe(response: Any) -> tuple[Any, ...]:
    entries = None
    if response.entries is not None:
        entries = sorted(
            ((_entity(e.entity), sorted((v.key, _value(v.value)) for v in e.values)) for e in response.entries),
            key=repr,
        )
    return int(response.error_code.value), response.error_message, entries


def _ok(entity: Entity) -> tuple[Any, ...]:
    return tuple(entity), 0, None


# ------------------------------------------------------------------------------------------------------------ tests

USER_EXACT = ("user", 0, "q-alice")


def test_valid_alterations_and_the_three_match_types(pair: Pair) -> None:
    entries: list[tuple[Entity, list[Op]]] = [
        ([("user", "q-alice")], [("producer_byte_rate", 1024), ("consumer_byte_rate", 2048.0)]),
        ([("user", "q-alice"), ("client-id", "q-app")], [("request_percentage", 12.5)]),
        ([("user", None)], [("controller_mutation_rate", 0.5)]),
        ([("client-id", None)], [("producer_byte_rate", 4096)]),
        ([("user", None), ("client-id", None)], [("consumer_byte_rate", 1000)]),
        ([("user", "q-bob"), ("client-id", None)], [("producer_byte_rate", 10)]),
        ([("ip", "127.0.0.1")], [("connection_creation_rate", 10)]),
        ([("ip", None)], [("connection_creation_rate", 100)]),
    ]
    answer = pair.alter(entries)
    assert {(frozenset(entity), code) for entity, code, _ in answer} == {(frozenset(e), 0) for e, _ in entries}
    described = pair.describe([USER_EXACT])
    assert described[2] == [
        ((("client-id", "q-app"), ("user", "q-alice")), [("request_percentage", 12.5)]),
        ((("user", "q-alice"),), [("consumer_byte_rate", 2048.0), ("producer_byte_rate", 1024.0)]),
    ]
    for components in (
        [USER_EXACT],
        [("user", 1, None)],
        [("user", 2, None)],
        [("client-id", 2, None)],
        [("client-id", 1, None)],
        [("user", 2, None), ("client-id", 1, None)],
        [("user", 1, None), ("client-id", 1, None)],
        [("ip", 2, None)],
        [("ip", 1, None)],
        [("ip", 0, "127.0.0.1")],
        [],
    ):
        for strict in (False, True):
            pair.describe(components, strict=strict)
    pair.describe([USER_EXACT], version=0)


def test_invalid_alterations_answer_kafkas_errors_and_change_nothing(pair: Pair) -> None:
    user = [("user", "q-invalid")]
    cases: list[list[tuple[Entity, list[Op]]]] = [
        [(user, [("no_such_quota", 1)])],
        [(user, [("producer_byte_rate", -5)])],
        [(user, [("producer_byte_rate", 0)])],
        [(user, [("request_percentage", -0.5)])],
        [(user, [("producer_byte_rate", 1.5)])],
        [(user, [("producer_byte_rate", 1e19)])],
        [(user, [("connection_creation_rate", 5)])],
        [([("ip", "10.0.0.1")], [("connection_creation_rate", 3e9)])],
        [([("ip", "10.0.0.1")], [("connection_creation_rate", 2.5)])],
        [([("ip", "10.0.0.1")], [("producer_byte_rate", 5)])],
        [([("ip", "10.0.0.1"), ("user", "q-invalid")], [("connection_creation_rate", 5)])],
        [([("ip", "no-such-host.invalid")], [("connection_creation_rate", 5)])],
        [([], [("producer_byte_rate", 5)])],
        [([("group", "g")], [("producer_byte_rate", 5)])],
        [([("user", "")], [("producer_byte_rate", 5)])],
        [([("user", "q-invalid"), ("group", "g"), ("client-id", "")], [("producer_byte_rate", 5)])],
        [(user, [("producer_byte_rate", 5), ("producer_byte_rate", 6)])],
        [(user, [("producer_byte_rate", 5)]), (user, [("consumer_byte_rate", 6)])],
        [(user, [("no_such_quota", 1), ("bad_too", 2), ("producer_byte_rate", 0.5)])],
        [(user, [("producer_byte_rate", 5)]), ([("user", "q-other")], [("nope", 1)]), ([("x", None)], [])],
    ]
    for entries in cases:
        answer = pair.alter(entries, validate_only=True)
        assert any(code != 0 for _, code, _ in answer), entries
    for entries in cases[:6]:
        pair.alter(entries)
    pair.describe([("user", 0, "q-invalid")])
    pair.alter([(user, [("producer_byte_rate", 1.5)])], version=0)


def test_duplicate_entity_still_applies_its_first_valid_entry_as_kafka_does(pair: Pair) -> None:
    user = [("user", "q-dup")]
    pair.alter([(user, [("producer_byte_rate", 5)]), (user, [("consumer_byte_rate", 6)])])
    pair.describe([("user", 0, "q-dup")])


def test_validate_only_and_removal(pair: Pair) -> None:
    user = [("user", "q-carol")]
    assert pair.alter([(user, [("producer_byte_rate", 100)])], validate_only=True) == [_ok(user)]
    assert pair.describe([("user", 0, "q-carol")])[2] == []
    pair.alter([(user, [("producer_byte_rate", 100), ("consumer_byte_rate", 200)])])
    pair.describe([("user", 0, "q-carol")])
    # Removals are not validated: an unknown key, or one not stored, is a success.
    pair.alter([(user, [("producer_byte_rate", None), ("no_such_quota", None)])], validate_only=True)
    pair.describe([("user", 0, "q-carol")])
    pair.alter([(user, [("producer_byte_rate", None), ("no_such_quota", None)])])
    assert pair.describe([("user", 0, "q-carol")])[2] == [((("user", "q-carol"),), [("consumer_byte_rate", 200.0)])]
    pair.alter([(user, [("consumer_byte_rate", None)]), ([("user", "q-never")], [("producer_byte_rate", None)])])
    assert pair.describe([("user", 0, "q-carol")])[2] == []
    # Setting the same value again, then a new one.
    pair.alter([(user, [("producer_byte_rate", 7)])])
    pair.alter([(user, [("producer_byte_rate", 7), ("request_percentage", 50)])])
    pair.describe([("user", 0, "q-carol")])


@pytest.mark.parametrize(
    "components",
    [
        [("", 2, None)],
        [("user", 2, None), ("user", 0, "x")],
        [("group", 2, None)],
        [("user", 0, None)],
        [("user", 1, "x")],
        [("user", 2, "x")],
        [("user", 7, None)],
        [("ip", 2, None), ("user", 1, None)],
        [("client-id", 0, "x"), ("ip", 0, "1.2.3.4")],
    ],
)
def test_malformed_filters_answer_kafkas_top_level_error(pair: Pair, components: list[Any]) -> None:
    code, _message, entries = pair.describe(components)
    assert code != 0
    assert entries is None


def test_a_user_without_cluster_rights_is_refused_as_kafka_refuses(
    kafka: KafkaBroker, guard: ServerHandle, outsider: str
) -> None:
    both = Pair(kafka, guard, outsider, OUTSIDER_PASSWORD)
    try:
        assert both.describe([("user", 2, None)]) == (31, None, None)
        denied = both.alter([([("user", "q-x"), ("user", "q-y")], [("producer_byte_rate", 1)]), ([], [])])
        assert {code for _, code, _ in denied} == {31}
    finally:
        both.close()


# ---------------------------------------------------------------------------------------------- kafka-configs


def _config_command(kafka: KafkaBroker, bootstrap: str, config: Path, *args: str) -> str:
    command = kafka.java_command(
        "kafka.admin.ConfigCommand", "--bootstrap-server", bootstrap, "--command-config", str(config), *args
    )
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_kafka_configs_alters_and_describes_user_quotas_alike(
    kafka: KafkaBroker, guard: ServerHandle, tmp_path: Path
) -> None:
    config = kafka.client_properties(tmp_path / "admin.properties")
    targets = {"kafkaguard": guard.bootstrap(SecurityProtocol.SASL_PLAINTEXT), "kafka": kafka.bootstrap}
    outputs: dict[str, list[str]] = {name: [] for name in targets}
    steps = [
        ["--alter", "--add-config", "producer_byte_rate=1024", "--entity-type", "users", "--entity-name", "cfg-alice"],
        ["--alter", "--add-config", "consumer_byte_rate=2048,request_percentage=20", "--entity-type", "users",
         "--entity-name", "cfg-alice", "--entity-type", "clients", "--entity-name", "cfg-app"],
        ["--alter", "--add-config", "producer_byte_rate=512", "--entity-type", "clients", "--entity-default"],
        ["--describe", "--entity-type", "users", "--entity-name", "cfg-alice"],
        ["--describe", "--entity-type", "users", "--entity-name", "cfg-alice", "--entity-type", "clients"],
        ["--describe", "--entity-type", "clients", "--entity-default"],
        ["--describe", "--entity-type", "users"],
        ["--alter", "--delete-config", "producer_byte_rate", "--entity-type", "users", "--entity-name", "cfg-alice"],
        ["--describe", "--entity-type", "users", "--entity-name", "cfg-alice"],
    ]  # fmt: skip
    for step in steps:
        for name, bootstrap in targets.items():
            output = _config_command(kafka, bootstrap, config, *step)
            if step[0] == "--describe":
                output = _describe_lines(output)
            if step[0] == "--describe" and name == "kafka":
                output = _settled(kafka, bootstrap, config, step, outputs, output)
            outputs[name].append(output)
    assert outputs["kafkaguard"] == outputs["kafka"]
    assert "Quota configs for user-principal 'cfg-alice' are producer_byte_rate=1024.0" in outputs["kafka"][3]


def _settled(
    kafka: KafkaBroker, bootstrap: str, config: Path, step: list[str], outputs: dict[str, list[str]], output: str
) -> str:
    """Kafka's describe, re-run while it differs from kafkaguard's (the broker may not have the change yet)."""
    deadline = time.monotonic() + SETTLE_SECONDS
    expected = outputs["kafkaguard"][len(outputs["kafka"])]
    while output != expected and time.monotonic() < deadline:
        time.sleep(0.5)  # the broker learns the controller's change asynchronously
        output = _describe_lines(_config_command(kafka, bootstrap, config, *step))
    return output


#: The users this module makes on both sides (the session's broker also holds other modules' users, which a
#: describe of every user lists: only these are compared).
_OURS = re.compile(r"user-principal '(q-|cfg-|admin')|the default user-principal|^(?!.*user-principal)")


def _describe_lines(output: str) -> str:
    """kafka-configs' describe output with its lines sorted: one line per entity, printed in the order of the admin
    client's HashMap of the response. The mechanisms of a SCRAM line are sorted too: Kafka lists a user's
    mechanisms in an order that changes from one broker start to the next. Lines about other modules' users go."""
    lines = []
    for line in output.splitlines():
        if not _OURS.search(line):
            continue
        head, sep, tail = line.partition(" are ")
        if head.startswith("SCRAM credential configs") and sep:
            line = head + sep + ", ".join(sorted(tail.split(", ")))
        lines.append(line + "\n")
    return "".join(sorted(lines))
