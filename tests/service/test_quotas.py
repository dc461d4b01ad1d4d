"""QuotaService: Kafka's validation and messages, the describe filter's match semantics, validate_only, removal,
the snapshot that describe reads, and the Java HashMap order that decides Kafka's answers."""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Sequence
from pathlib import Path

import pytest

from kafkaguard.model import KafkaErrorCode
from kafkaguard.service.quotas import (
    IP_KEYS,
    MATCH_DEFAULT,
    MATCH_EXACT,
    MATCH_SPECIFIED,
    USER_AND_CLIENT_KEYS,
    QuotaAlteration,
    QuotaFilterComponent,
    QuotaOp,
    QuotaService,
    check_quota_value,
    entity_text,
    java_entity,
    java_order,
    java_string_hash,
    matches,
)
from kafkaguard.store import MemoryQuotaStore, QuotaRecord, SqliteStore
from tests.actors import ACTOR
from tests.service.guarded import GuardedStore
from tests.service.outcomes import code_of, message_of

INVALID = KafkaErrorCode.INVALID_REQUEST
TOO_LARGE = "Proposed value for {} is too large for {}."


def service(resolvable: frozenset[str] = frozenset()) -> QuotaService:
    return QuotaService(MemoryQuotaStore(), resolve=lambda host: host in resolvable or _is_address(host))


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def alteration(entity: Sequence[tuple[str, str | None]], *ops: tuple[str, float | None]) -> QuotaAlteration:
    return QuotaAlteration(
        entity=tuple(entity),
        ops=tuple(QuotaOp(key=k, value=v or 0.0, remove=v is None) for k, v in ops),
    )


# ------------------------------------------------------------------------------------------- Java HashMap order


def test_java_string_hash_is_javas() -> None:
    # Java: "user".hashCode(), "".hashCode(), "é".hashCode() (one UTF-16 unit), as unsigned 32-bit ints
    assert java_string_hash("user") == 3599307
    assert java_string_hash("") == 0
    assert java_string_hash("é") == 233


def test_java_order_is_the_bucket_order_of_the_final_table() -> None:
    # new HashMap<>(2) with "user" then "client-id": capacity 4 after the resize; client-id's bucket comes first
    # (as Kafka answered in tests/kafka/test_quotas.py).
    assert java_order(["user", "client-id"], java_string_hash, 2) == ["client-id", "user"]
    assert java_order(["user", "user"], java_string_hash, 2) == ["user"]
    assert java_entity((("user", "a"), ("group", "g"), ("user", "b"))) == java_entity((("group", "g"), ("user", "b")))
    assert entity_text((("client-id", None), ("user", "alice"))) == (
        "ClientQuotaEntity(entries={client-id=null, user=alice})"
    )


# --------------------------------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("keys", "key", "value", "error"),
    [
        (USER_AND_CLIENT_KEYS, "producer_byte_rate", 1024.0, None),
        (USER_AND_CLIENT_KEYS, "producer_byte_rate", 1024.0000001, None),  # within Kafka's 1e-6
        (USER_AND_CLIENT_KEYS, "producer_byte_rate", 1.5, "producer_byte_rate cannot be a fractional value."),
        (USER_AND_CLIENT_KEYS, "producer_byte_rate", 0.0, "Quota producer_byte_rate must be greater than 0"),
        (USER_AND_CLIENT_KEYS, "consumer_byte_rate", -1.0, "Quota consumer_byte_rate must be greater than 0"),
        (USER_AND_CLIENT_KEYS, "consumer_byte_rate", 2.0**63, None),  # == (double) Long.MAX_VALUE
        (USER_AND_CLIENT_KEYS, "consumer_byte_rate", 2.0**64, TOO_LARGE.format("consumer_byte_rate", "a LONG")),
        (USER_AND_CLIENT_KEYS, "producer_byte_rate", math.inf, TOO_LARGE.format("producer_byte_rate", "a LONG")),
        (USER_AND_CLIENT_KEYS, "producer_byte_rate", math.nan, None),  # Kafka lets NaN through
        (USER_AND_CLIENT_KEYS, "request_percentage", 0.25, None),
        (USER_AND_CLIENT_KEYS, "request_percentage", math.inf, None),
        (USER_AND_CLIENT_KEYS, "connection_creation_rate", 1.0, "Invalid configuration key connection_creation_rate"),
        (IP_KEYS, "connection_creation_rate", 2147483647.0, None),
        (IP_KEYS, "connection_creation_rate", 2147483648.0, TOO_LARGE.format("connection_creation_rate", "an INT")),
        (IP_KEYS, "producer_byte_rate", 1.0, "Invalid configuration key producer_byte_rate"),
    ],
)  # fmt: skip
def test_quota_values_are_checked_as_kafka_checks_them(
    keys: dict[str, str], key: str, value: float, error: str | None
) -> None:
    assert check_quota_value(keys, key, value) == error


@pytest.mark.parametrize(
    ("entity", "message"),
    [
        ([], "Invalid empty client quota entity"),
        ([("group", "g")], "Unhandled client quota entity type: group"),
        ([("user", "")], "Empty user not supported"),
        ([("ip", "10.0.0.1"), ("client-id", None)],
         "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"),
        ([("ip", "no-such-host")], "no-such-host is not a valid IP or resolvable host."),
    ],
)  # fmt: skip
def test_bad_entities_fail_alone_with_kafkas_message(entity: list[tuple[str, str | None]], message: str) -> None:
    quotas = service()
    good = alteration([("user", "alice")], ("producer_byte_rate", 5.0))
    results = quotas.alter([alteration(entity, ("producer_byte_rate", 5.0)), good], actor=ACTOR)
    assert {(code_of(r), message_of(r)) for r in results} == {(INVALID, message), (KafkaErrorCode.NONE, None)}
    assert quotas.quotas() == (QuotaRecord((("user", "alice"),), {"producer_byte_rate": 5.0}),)


def test_ip_entities_accept_addresses_resolvable_names_and_the_default() -> None:
    quotas = service(frozenset({"db.example"}))
    results = quotas.alter(
        [alteration([("ip", host)], ("connection_creation_rate", 10.0)) for host in ("10.0.0.1", "::1", "db.example")]
        + [alteration([("ip", None)], ("connection_creation_rate", 20.0))],
        actor=ACTOR,
    )
    assert all(r.succeeded for r in results)
    assert len(quotas.quotas()) == 4


def test_an_invalid_key_fails_the_entity_and_nothing_of_it_is_stored() -> None:
    quotas = service()
    (result,) = quotas.alter([alteration([("user", "a")], ("producer_byte_rate", 5.0), ("nope", 1.0))], actor=ACTOR)
    assert (code_of(result), message_of(result)) == (INVALID, "Invalid configuration key nope")
    assert quotas.quotas() == ()


def test_duplicates_answer_ignoring_duplicate_entity_and_the_first_valid_entry_still_applies() -> None:
    quotas = service()
    alice = [("user", "alice")]
    (dup_key,) = quotas.alter(
        [alteration(alice, ("producer_byte_rate", 5.0), ("producer_byte_rate", 6.0))], actor=ACTOR
    )
    assert message_of(dup_key) == "Ignoring duplicate entity ClientQuotaEntity(entries={user=alice})"
    assert quotas.quotas() == ()
    (dup_entity,) = quotas.alter(
        [alteration(alice, ("producer_byte_rate", 5.0)), alteration(alice, ("x", 1.0))], actor=ACTOR
    )
    assert code_of(dup_entity) is INVALID
    assert quotas.quotas() == (QuotaRecord((("user", "alice"),), {"producer_byte_rate": 5.0}),)


def test_validate_only_writes_nothing_and_removal_is_never_validated(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "kafkaguard.db")
    quotas = QuotaService(store)
    alice = [("user", "alice")]
    assert quotas.alter([alteration(alice, ("producer_byte_rate", 5.0))], validate_only=True, actor=ACTOR)[0].succeeded
    assert quotas.quotas() == () and store.quota_version() == 0
    quotas.alter([alteration(alice, ("producer_byte_rate", 5.0), ("request_percentage", 10.0))], actor=ACTOR)
    version = store.quota_version()
    quotas.alter([alteration(alice, ("producer_byte_rate", 5.0))], actor=ACTOR)  # the same value: no write
    assert store.quota_version() == version
    (removed,) = quotas.alter([alteration(alice, ("producer_byte_rate", None), ("not_a_quota", None))], actor=ACTOR)
    assert removed.succeeded
    assert quotas.quotas() == (QuotaRecord((("user", "alice"),), {"request_percentage": 10.0}),)
    store.close()


def test_nan_is_stored_and_setting_it_again_changes_nothing() -> None:
    store = MemoryQuotaStore()
    quotas = QuotaService(store)
    alice = [("user", "alice")]
    quotas.alter([alteration(alice, ("request_percentage", math.nan))], actor=ACTOR)
    version = store.quota_version()
    quotas.alter([alteration(alice, ("request_percentage", math.nan))], actor=ACTOR)
    assert store.quota_version() == version
    assert math.isnan(quotas.quotas()[0].values["request_percentage"])


# ------------------------------------------------------------------------------------------------------ describe

ENTITIES: list[list[tuple[str, str | None]]] = [
    [("user", "alice")],
    [("user", None)],
    [("user", "alice"), ("client-id", "app")],
    [("user", None), ("client-id", None)],
    [("client-id", "app")],
    [("ip", "10.0.0.1")],
]


@pytest.fixture
def populated() -> QuotaService:
    quotas = service()
    results = quotas.alter(
        [
            alteration(e, ("connection_creation_rate" if e[0][0] == "ip" else "producer_byte_rate", float(i + 1)))
            for i, e in enumerate(ENTITIES)
        ],
        actor=ACTOR,
    )
    assert all(r.succeeded for r in results)
    return quotas


def _described(quotas: QuotaService, *components: tuple[str, int, str | None], strict: bool = False) -> set[str]:
    description = quotas.describe(
        [QuotaFilterComponent(entity_type=t, match_type=m, match=s) for t, m, s in components], strict=strict
    )
    assert description.entries is not None, description
    return {",".join(f"{t}={n}" for t, n in record.entity) for record in description.entries}


def test_match_types_exact_default_specified_and_strict(populated: QuotaService) -> None:
    exact, default, specified = MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED
    assert _described(populated, ("user", exact, "alice")) == {"user=alice", "client-id=app,user=alice"}
    assert _described(populated, ("user", exact, "alice"), strict=True) == {"user=alice"}
    assert _described(populated, ("user", default, None)) == {"user=None", "client-id=None,user=None"}
    assert _described(populated, ("user", default, None), strict=True) == {"user=None"}
    assert _described(populated, ("user", specified, None), strict=True) == {"user=alice", "user=None"}
    assert _described(populated, ("client-id", specified, None), ("user", specified, None)) == {
        "client-id=app,user=alice",
        "client-id=None,user=None",
    }
    assert _described(populated, ("ip", specified, None)) == {"ip=10.0.0.1"}
    assert len(_described(populated)) == len(ENTITIES)
    assert _described(populated, strict=True) == set()


@pytest.mark.parametrize(
    ("components", "code", "message"),
    [
        ([("", 2, None)], INVALID, "Invalid empty entity type."),
        ([("user", 2, None), ("user", 1, None)], INVALID,
         "Entity type user cannot appear more than once in the filter."),
        ([("group", 2, None)], KafkaErrorCode.UNSUPPORTED_VERSION, "Unsupported entity type group"),
        ([("user", 0, None)], INVALID, "Request specified MATCH_TYPE_EXACT, but set match string to null."),
        ([("user", 1, "a")], INVALID, "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."),
        ([("user", 2, "a")], INVALID, "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."),
        ([("user", 9, None)], INVALID, "Unknown match type 9"),
        ([("ip", 2, None), ("client-id", 1, None)], INVALID,
         "Invalid entity filter component combination. IP filter component should not be used with user or "
         "clientId filter component."),
    ],
)  # fmt: skip
def test_malformed_filters_answer_a_top_level_error(
    populated: QuotaService, components: list[tuple[str, int, str | None]], code: KafkaErrorCode, message: str
) -> None:
    description = populated.describe(
        [QuotaFilterComponent(entity_type=t, match_type=m, match=s) for t, m, s in components]
    )
    assert (description.entries, code_of(description), message_of(description)) == (None, code, message)


def test_matches_requires_every_exact_and_specified_type() -> None:
    entity = (("client-id", None), ("user", "alice"))
    assert matches(entity, {"user": "alice"}, [], strict=False)
    assert not matches(entity, {"user": "alice"}, [], strict=True)
    assert matches(entity, {"client-id": None}, ["user"], strict=True)
    assert not matches(entity, {"client-id": "x"}, [], strict=False)


# ------------------------------------------------------------------------------------------------------ snapshot


def test_describe_reads_only_the_snapshot_and_poll_follows_another_process(tmp_path: Path) -> None:
    path = tmp_path / "kafkaguard.db"
    with SqliteStore(path) as mine, SqliteStore(path) as theirs:
        guarded = GuardedStore(mine)
        quotas = QuotaService(guarded)
        other = QuotaService(theirs)
        other.alter([alteration([("user", "bob")], ("consumer_byte_rate", 7.0))], actor=ACTOR)
        guarded.closed = True
        assert quotas.describe([]).entries == ()
        assert guarded.refused == []
        guarded.closed = False
        assert quotas.poll() is True
        assert quotas.poll() is False
        guarded.closed = True
        assert quotas.quotas() == (QuotaRecord((("user", "bob"),), {"consumer_byte_rate": 7.0}),)
