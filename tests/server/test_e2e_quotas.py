"""DescribeClientQuotas / AlterClientQuotas end to end over SASL_PLAINTEXT with raw requests (no Python client
library speaks them): both versions, authorization, durability in the store, and another process's change."""

from __future__ import annotations

import time
from typing import Any

from kio.schema.alter_client_quotas.v0 import request as alter_v0
from kio.schema.alter_client_quotas.v1 import request as alter_v1
from kio.schema.describe_client_quotas.v0 import request as describe_v0
from kio.schema.describe_client_quotas.v1 import request as describe_v1
from kio.static.primitive import f64, i8

from kafkaguard.config import SecurityProtocol
from kafkaguard.service.quotas import QuotaAlteration, QuotaOp, QuotaService
from kafkaguard.store import QuotaRecord, SqliteStore
from tests.actors import ACTOR
from tests.serving import ADMIN, ADMIN_PASSWORD, ServerHandle
from tests.wire import Wire

SCHEMAS: dict[int, tuple[Any, Any]] = {0: (alter_v0, describe_v0), 1: (alter_v1, describe_v1)}


def _alter(wire: Wire, version: int, user: str | None, key: str, value: float, *, remove: bool = False) -> Any:
    schema = SCHEMAS[version][0]
    entry = schema.EntryData(
        entity=(schema.EntityData(entity_type="user", entity_name=user),),
        ops=(schema.OpData(key=key, value=f64(value), remove=remove),),
    )
    return wire.request(schema.AlterClientQuotasRequest(entries=(entry,), validate_only=False))


def _describe(wire: Wire, version: int, user: str | None, match_type: int = 0) -> Any:
    schema = SCHEMAS[version][1]
    component = schema.ComponentData(entity_type="user", match_type=i8(match_type), match=user)
    return wire.request(schema.DescribeClientQuotasRequest(components=(component,), strict=True))


def _values(response: Any) -> list[tuple[list[tuple[str, str | None]], dict[str, float]]]:
    assert response.error_code.value == 0, response
    return [
        ([(e.entity_type, e.entity_name) for e in entry.entity], {v.key: float(v.value) for v in entry.values})
        for entry in response.entries
    ]


def test_alter_then_describe_in_both_versions_and_the_store_holds_it(server: ServerHandle) -> None:
    with Wire(server.sasl) as wire:
        wire.login(ADMIN, ADMIN_PASSWORD)
        for version in (0, 1):
            user = f"e2e-quota-v{version}"
            (entry,) = _alter(wire, version, user, "producer_byte_rate", 1024.0).entries
            assert (entry.error_code.value, entry.error_message) == (0, None)
            assert _values(_describe(wire, version, user)) == [([("user", user)], {"producer_byte_rate": 1024.0})]
            (bad,) = _alter(wire, version, user, "producer_byte_rate", 1.5).entries
            assert (bad.error_code.value, bad.error_message) == (42, "producer_byte_rate cannot be a fractional value.")
            _alter(wire, version, user, "producer_byte_rate", 0.0, remove=True)
            assert _values(_describe(wire, version, user)) == []
        _alter(wire, 1, None, "consumer_byte_rate", 4096.0)
        assert _values(_describe(wire, 1, None, match_type=1)) == [([("user", None)], {"consumer_byte_rate": 4096.0})]
    with SqliteStore(server.services.settings.database_path) as store:
        assert QuotaRecord((("user", None),), {"consumer_byte_rate": 4096.0}) in store.load_quotas().quotas


def test_a_user_without_cluster_rights_gets_cluster_authorization_failed(server: ServerHandle) -> None:
    server.add_user("quota-nobody", "nobody-secret")
    with Wire(server.sasl) as wire:
        wire.login("quota-nobody", "nobody-secret")
        described = _describe(wire, 1, None, match_type=2)
        assert (described.error_code.value, described.error_message, described.entries) == (31, None, None)
        (entry,) = _alter(wire, 1, "quota-nobody", "producer_byte_rate", 1.0).entries
        assert (entry.error_code.value, entry.error_message) == (31, "Cluster authorization failed.")
    assert all(record.entity != (("user", "quota-nobody"),) for record in server.services.quotas.quotas())


def test_another_processs_change_is_described_after_the_sync_poll(server: ServerHandle) -> None:
    with SqliteStore(server.services.settings.database_path) as store:
        other = QuotaService(store)
        (result,) = other.alter(
            [
                QuotaAlteration(
                    entity=(("user", "from-elsewhere"),), ops=(QuotaOp(key="request_percentage", value=5.0),)
                )
            ],
            actor=ACTOR,
        )
        assert result.succeeded
    with Wire(server.address(SecurityProtocol.SASL_PLAINTEXT)) as wire:
        wire.login(ADMIN, ADMIN_PASSWORD)
        deadline = time.monotonic() + 5
        while not _values(_describe(wire, 1, "from-elsewhere")) and time.monotonic() < deadline:
            time.sleep(0.05)  # the server polls the store every sync_interval_seconds (0.2 s here)
        assert _values(_describe(wire, 1, "from-elsewhere")) == [
            ([("user", "from-elsewhere")], {"request_percentage": 5.0})
        ]
