"""``JwksSource`` and ``parse_jwks``: a file: JWKS and an https JWKS served on 127.0.0.1 by a thread with a test CA;
start-up failures, periodic refresh, the expedited refresh on an unknown kid and its rate limit (Kafka's
missing-kid cache: 60 s per kid, 16 kids, LRU), failed fetches keeping the keys, and an event loop that keeps
running while a fetch is slow."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkaguard.identity.jwks import (
    MISSING_KEY_ID_CACHE_MAX_ENTRIES,
    MISSING_KEY_ID_MAX_KEY_LENGTH,
    JwksSource,
    JwksStatistics,
    JwksUnavailableError,
    RefreshReason,
    SkipReason,
    parse_jwks,
)
from tests.identity.jwks_server import JwksServer, jwks_endpoint
from tests.identity.tokens import jwks_document, public_jwk, session_keys, write_jwks

#: kafkaguard's limit for the whole source out of the way, for the tests of Kafka's per-kid rule alone.
KAFKAS_RULE_ONLY = 10_000


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def first_two_keys() -> dict[str, object]:
    document = jwks_document()
    return {"keys": document["keys"][:2]}  # rsa-1, ec-1: rsa-2 is "rotated in" later


# --- parse_jwks ---------------------------------------------------------------------------------------------------


def test_parse_keeps_usable_keys_in_order_and_logs_the_rest(caplog: pytest.LogCaptureFixture) -> None:
    document = jwks_document()
    bad = [
        {"kty": "oct", "kid": "hmac", "k": "c2VjcmV0"},
        {"kty": "RSA", "kid": "broken", "n": "!!", "e": "AQAB"},
        {"kty": "XYZ", "kid": "unknown"},
        "not an object",
        {"kty": "RSA", "kid": 5, **{k: v for k, v in document["keys"][0].items() if k in ("n", "e")}},
    ]
    caplog.set_level(logging.WARNING, logger="kafkaguard.identity.jwks")
    keys = parse_jwks(json.dumps({"keys": [bad[0], document["keys"][0], *bad[1:], *document["keys"][1:]]}))
    assert [key.kid for key in keys.keys] == ["rsa-1", "ec-1", "rsa-2"]
    assert [key.kty for key in keys.keys] == ["RSA", "EC", "RSA"]
    skipped = [r.getMessage() for r in caplog.records if "skipping key" in r.getMessage()]
    assert len(skipped) == 5
    assert any("'hmac'" in message and "oct" in message for message in skipped)


def test_private_jwks_keep_only_the_public_part() -> None:
    from jwt.algorithms import RSAAlgorithm

    private_jwk = json.loads(RSAAlgorithm.to_jwk(session_keys().rsa_1)) | {"kid": "p"}
    (key,) = parse_jwks(json.dumps({"keys": [private_jwk]})).keys
    assert not hasattr(key.key, "private_numbers")
    assert key.key.public_numbers() == session_keys().rsa_1.public_key().public_numbers()


@pytest.mark.parametrize(("document", "reason"), [("nope", "not JSON"), ("{}", "no 'keys' list"), ("[]", "no 'keys'")])
def test_parse_refuses_a_document_without_keys(document: str, reason: str) -> None:
    with pytest.raises(JwksUnavailableError, match=reason):
        parse_jwks(document)


def test_empty_key_list_is_a_valid_empty_set() -> None:
    assert parse_jwks('{"keys": []}').keys == ()


def test_urls_other_than_https_and_file_are_refused() -> None:
    with pytest.raises(JwksUnavailableError, match="neither https"):
        JwksSource("http://127.0.0.1/jwks")


# --- file: ----------------------------------------------------------------------------------------------------------


def test_file_source_loads_and_finds_a_rotated_key_on_an_unknown_kid(tmp_path: Path) -> None:
    path = write_jwks(tmp_path / "jwks.json", first_two_keys())
    clock = FakeClock()

    async def scenario() -> None:
        source = JwksSource(path.as_uri(), clock=clock)
        await source.start()
        try:
            assert source.keys.key_ids() == {"rsa-1", "ec-1"}
            assert source.fetches == 1
            write_jwks(path, jwks_document())  # the IdP rotates: rsa-2 appears
            assert (await source.keys_for("rsa-1")).key_ids() == {"rsa-1", "ec-1"}  # known kid: no read
            assert source.fetches == 1
            keys = await source.keys_for("rsa-2")  # unknown: one expedited read, awaited
            assert keys.key_ids() == {"rsa-1", "ec-1", "rsa-2"}
            assert source.fetches == 2
        finally:
            await source.close()

    asyncio.run(scenario())


def test_unknown_kid_refreshes_at_most_once_a_minute_per_kid(tmp_path: Path) -> None:
    path = write_jwks(tmp_path / "jwks.json", first_two_keys())
    clock = FakeClock()

    async def scenario() -> None:
        source = JwksSource(f"file:{path}", clock=clock, expedited_refreshes_per_minute=KAFKAS_RULE_ONLY)
        await source.start()
        try:
            await source.keys_for("ghost")
            assert source.fetches == 2
            clock.now += 59.9
            await source.keys_for("ghost")  # still in flight: no read
            assert source.fetches == 2
            await source.keys_for("other-ghost")  # another kid: its own read
            assert source.fetches == 3
            clock.now += 0.1  # 60 s after the first: allowed again
            await source.keys_for("ghost")
            assert source.fetches == 4
        finally:
            await source.close()

    asyncio.run(scenario())


def test_missing_kid_cache_holds_16_kids_least_recently_asked_first_out(tmp_path: Path) -> None:
    path = write_jwks(tmp_path / "jwks.json", first_two_keys())
    clock = FakeClock()

    async def scenario() -> None:
        source = JwksSource(f"file:{path}", clock=clock, expedited_refreshes_per_minute=KAFKAS_RULE_ONLY)
        await source.start()
        try:
            for number in range(MISSING_KEY_ID_CACHE_MAX_ENTRIES):
                await source.keys_for(f"kid-{number}")
            assert source.fetches == 1 + MISSING_KEY_ID_CACHE_MAX_ENTRIES
            await source.keys_for("kid-0")  # cached: no read, and now the most recently asked
            assert source.fetches == 1 + MISSING_KEY_ID_CACHE_MAX_ENTRIES
            await source.keys_for("kid-new")  # the 17th kid evicts kid-1 (least recently asked)
            fetches = source.fetches
            await source.keys_for("kid-0")
            assert source.fetches == fetches  # kept
            await source.keys_for("kid-1")
            assert source.fetches == fetches + 1  # evicted, so asked again at once
        finally:
            await source.close()

    asyncio.run(scenario())


def test_a_kid_found_by_a_refresh_is_forgotten(tmp_path: Path) -> None:
    path = write_jwks(tmp_path / "jwks.json", first_two_keys())
    clock = FakeClock()

    async def scenario() -> None:
        source = JwksSource(f"file:{path}", clock=clock, expedited_refreshes_per_minute=KAFKAS_RULE_ONLY)
        await source.start()
        try:
            await source.keys_for("rsa-2")  # not there yet: read, remembered
            write_jwks(path, jwks_document())
            await source.keys_for("rsa-3")  # another kid's read finds rsa-2: rsa-2 is forgotten
            write_jwks(path, first_two_keys())
            await source.keys_for("rsa-4")
            fetches = source.fetches
            await source.keys_for("rsa-2")  # gone again, and not in the cache: read at once
            assert source.fetches == fetches + 1
        finally:
            await source.close()

    asyncio.run(scenario())


def test_too_long_kid_never_refreshes(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = write_jwks(tmp_path / "jwks.json", first_two_keys())

    async def scenario() -> None:
        source = JwksSource(f"file:{path}")
        await source.start()
        try:
            await source.keys_for("k" * (MISSING_KEY_ID_MAX_KEY_LENGTH + 1))
            assert source.fetches == 1
            await source.keys_for("k" * MISSING_KEY_ID_MAX_KEY_LENGTH)
            assert source.fetches == 2
        finally:
            await source.close()

    asyncio.run(scenario())
    assert any("was too long to cache" in r.getMessage() for r in caplog.records)


def test_kidless_token_asks_for_no_refresh(tmp_path: Path) -> None:
    path = write_jwks(tmp_path / "jwks.json", first_two_keys())

    async def scenario() -> None:
        source = JwksSource(f"file:{path}")
        await source.start()
        try:
            assert (await source.keys_for(None)).key_ids() == {"rsa-1", "ec-1"}
            assert source.fetches == 1
        finally:
            await source.close()

    asyncio.run(scenario())


def test_missing_file_fails_the_start_clearly(tmp_path: Path) -> None:
    async def scenario() -> None:
        source = JwksSource(f"file:{tmp_path / 'absent.json'}")
        try:
            with pytest.raises(JwksUnavailableError, match=r"Could not load the OAUTHBEARER JWKS .*absent\.json"):
                await source.start()
            with pytest.raises(JwksUnavailableError, match="not been started"):
                _ = source.keys
        finally:
            await source.close()

    asyncio.run(scenario())


def test_unreadable_file_later_keeps_the_keys(tmp_path: Path) -> None:
    path = write_jwks(tmp_path / "jwks.json", first_two_keys())

    async def scenario() -> None:
        source = JwksSource(f"file:{path}", retry_backoff_ms=1, retry_backoff_max_ms=20)
        await source.start()
        try:
            path.write_text("{ broken")
            keys = await source.keys_for("rsa-2")
            assert keys.key_ids() == {"rsa-1", "ec-1"}
            assert source.fetches >= 3  # retried (1, 2, 4, 8 ms …) within 20 ms, then gave up
        finally:
            await source.close()

    asyncio.run(scenario())


# --- kafkaguard's limit for the whole source (issue 36) -------------------------------------------------------------


def test_new_kids_refresh_at_most_the_limit_in_any_minute(tmp_path: Path) -> None:
    """A new kid every time passes Kafka's per-kid rule every time; the source's limit does not: 10 new kids, limit 3,
    3 refreshes and 7 refused without a read. A minute after the first refresh, one more is allowed."""
    path = write_jwks(tmp_path / "jwks.json", first_two_keys())
    clock, statistics = FakeClock(), JwksStatistics()

    async def scenario() -> None:
        source = JwksSource(f"file:{path}", clock=clock, expedited_refreshes_per_minute=3, statistics=statistics)
        await source.start()
        try:
            for number in range(10):
                assert (await source.keys_for(f"forged-{number}")).key_ids() == {"rsa-1", "ec-1"}
                clock.now += 1
            assert source.fetches == 1 + 3
            assert statistics.count(RefreshReason.UNKNOWN_KID) == 3
            assert statistics.count(SkipReason.RATE_LIMITED) == 7
            clock.now += 49.9  # 59.9 s after the first refresh: still three in the last minute
            await source.keys_for("forged-late")
            assert source.fetches == 4
            clock.now += 0.1  # 60 s after it: one may go
            await source.keys_for("forged-later")
            assert source.fetches == 5
            assert statistics.count(RefreshReason.UNKNOWN_KID) == 4
        finally:
            await source.close()

    asyncio.run(scenario())


def test_a_kid_refused_by_the_limit_is_not_remembered(tmp_path: Path) -> None:
    """A real new key's kid that came while the limit was used up is refreshed for as soon as the limit allows (Kafka's
    per-kid rule would otherwise hold it back another minute)."""
    path = write_jwks(tmp_path / "jwks.json", first_two_keys())
    clock, statistics = FakeClock(), JwksStatistics()

    async def scenario() -> None:
        source = JwksSource(f"file:{path}", clock=clock, expedited_refreshes_per_minute=1, statistics=statistics)
        await source.start()
        try:
            await source.keys_for("forged")  # uses the minute's one refresh
            write_jwks(path, jwks_document())  # the identity provider rotates rsa-2 in
            assert "rsa-2" not in (await source.keys_for("rsa-2")).key_ids()  # refused: no read
            assert source.fetches == 2
            clock.now += 60
            assert "rsa-2" in (await source.keys_for("rsa-2")).key_ids()  # not held back by the per-kid rule
            assert source.fetches == 3
            assert statistics.counts() == {RefreshReason.UNKNOWN_KID: 2, SkipReason.RATE_LIMITED: 1}
        finally:
            await source.close()

    asyncio.run(scenario())


def test_a_limit_of_zero_never_refreshes_for_an_unknown_kid(tmp_path: Path) -> None:
    path = write_jwks(tmp_path / "jwks.json", first_two_keys())
    statistics = JwksStatistics()

    async def scenario() -> None:
        source = JwksSource(f"file:{path}", expedited_refreshes_per_minute=0, statistics=statistics)
        await source.start()
        try:
            for number in range(3):
                await source.keys_for(f"kid-{number}")
            assert source.fetches == 1
            assert statistics.counts() == {SkipReason.RATE_LIMITED: 3}
        finally:
            await source.close()

    asyncio.run(scenario())


def test_kafkas_per_kid_rule_still_applies_within_the_limit_and_is_counted(tmp_path: Path) -> None:
    path = write_jwks(tmp_path / "jwks.json", first_two_keys())
    clock, statistics = FakeClock(), JwksStatistics()

    async def scenario() -> None:
        source = JwksSource(f"file:{path}", clock=clock, statistics=statistics)  # the default limit, 6
        await source.start()
        try:
            for _ in range(4):
                await source.keys_for("ghost")
            await source.keys_for("k" * (MISSING_KEY_ID_MAX_KEY_LENGTH + 1))
            assert source.fetches == 2
            assert statistics.counts() == {
                RefreshReason.UNKNOWN_KID: 1,
                SkipReason.KID_RECENTLY_ASKED: 3,
                SkipReason.KID_TOO_LONG: 1,
            }
        finally:
            await source.close()

    asyncio.run(scenario())


def test_scheduled_refreshes_are_counted_apart(tmp_path: Path) -> None:
    path = write_jwks(tmp_path / "jwks.json", first_two_keys())
    statistics = JwksStatistics()

    async def scenario() -> None:
        source = JwksSource(f"file:{path}", refresh_ms=50, statistics=statistics)
        await source.start()
        try:
            deadline = time.monotonic() + 5
            while statistics.count(RefreshReason.SCHEDULED) < 2 and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            assert statistics.count(RefreshReason.SCHEDULED) >= 2
            assert statistics.count(RefreshReason.UNKNOWN_KID) == 0
        finally:
            await source.close()

    asyncio.run(scenario())


def test_negative_limit_is_refused() -> None:
    with pytest.raises(JwksUnavailableError, match="expedited_refreshes_per_minute"):
        JwksSource("file:/nowhere", expedited_refreshes_per_minute=-1)


# --- https: ---------------------------------------------------------------------------------------------------------


@pytest.fixture
def jwks_server(tmp_path: Path) -> Iterator[JwksServer]:
    with jwks_endpoint(tmp_path, first_two_keys()) as server:
        yield server


def test_https_source_loads_with_the_test_ca(jwks_server: JwksServer) -> None:
    async def scenario() -> None:
        source = JwksSource(jwks_server.url, cafile=jwks_server.cafile)
        await source.start()
        try:
            assert source.keys.key_ids() == {"rsa-1", "ec-1"}
            assert jwks_server.hits == 1
        finally:
            await source.close()

    asyncio.run(scenario())


def test_https_source_verifies_tls(jwks_server: JwksServer) -> None:
    async def scenario() -> None:
        source = JwksSource(jwks_server.url)  # the system's trust store does not know the test CA
        try:
            with pytest.raises(JwksUnavailableError, match=r"Could not load the OAUTHBEARER JWKS.*ConnectError"):
                await source.start()
        finally:
            await source.close()

    asyncio.run(scenario())


def test_https_error_status_fails_the_start(jwks_server: JwksServer) -> None:
    jwks_server.serve({"error": "nope"}, status=503)

    async def scenario() -> None:
        source = JwksSource(jwks_server.url, cafile=jwks_server.cafile)
        try:
            with pytest.raises(JwksUnavailableError, match="HTTP 503"):
                await source.start()
        finally:
            await source.close()

    asyncio.run(scenario())


def test_https_source_refreshes_periodically(jwks_server: JwksServer) -> None:
    async def scenario() -> None:
        source = JwksSource(jwks_server.url, cafile=jwks_server.cafile, refresh_ms=200)
        await source.start()
        try:
            jwks_server.serve(jwks_document())
            deadline = time.monotonic() + 5
            while "rsa-2" not in source.keys.key_ids() and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            assert source.keys.key_ids() == {"rsa-1", "ec-1", "rsa-2"}
            assert jwks_server.hits >= 2
        finally:
            await source.close()

    asyncio.run(scenario())


def test_https_unknown_kid_refresh_is_rate_limited(jwks_server: JwksServer) -> None:
    clock = FakeClock()

    async def scenario() -> None:
        source = JwksSource(jwks_server.url, cafile=jwks_server.cafile, clock=clock)
        await source.start()
        try:
            for _ in range(5):
                await source.keys_for("ghost")
            assert jwks_server.hits == 2  # the start, then one expedited refresh for "ghost"
            jwks_server.serve(jwks_document())
            clock.now += 60
            assert "rsa-2" in (await source.keys_for("rsa-2")).key_ids()
            assert jwks_server.hits == 3
        finally:
            await source.close()

    asyncio.run(scenario())


def test_concurrent_callers_share_one_refresh(jwks_server: JwksServer) -> None:
    async def scenario() -> None:
        source = JwksSource(jwks_server.url, cafile=jwks_server.cafile)
        await source.start()
        try:
            jwks_server.serve(jwks_document(), delay=0.3)
            results = await asyncio.gather(*(source.keys_for("rsa-2") for _ in range(8)))
            assert all("rsa-2" in keys.key_ids() for keys in results)  # all waited for the one refresh
            assert jwks_server.hits == 2
        finally:
            await source.close()

    asyncio.run(scenario())


def test_callers_sharing_a_running_refresh_do_not_use_up_the_limit(jwks_server: JwksServer) -> None:
    """With a limit of one a minute, eight different unknown kids at once: one fetch, all eight wait for it (none is
    refused by the limit: the refresh they share was already on its way)."""
    statistics = JwksStatistics()

    async def scenario() -> None:
        source = JwksSource(jwks_server.url, cafile=jwks_server.cafile, expedited_refreshes_per_minute=1,
                            statistics=statistics)  # fmt: skip
        await source.start()
        try:
            jwks_server.serve(jwks_document(), delay=0.3)
            kids = ["rsa-2", *(f"other-{number}" for number in range(7))]
            results = await asyncio.gather(*(source.keys_for(kid) for kid in kids))
            assert all("rsa-2" in keys.key_ids() for keys in results)
            assert jwks_server.hits == 2
            assert statistics.counts() == {RefreshReason.UNKNOWN_KID: 1}
        finally:
            await source.close()

    asyncio.run(scenario())


def test_failed_refresh_keeps_the_keys(jwks_server: JwksServer, caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        source = JwksSource(jwks_server.url, cafile=jwks_server.cafile, retry_backoff_ms=10, retry_backoff_max_ms=100)
        await source.start()
        try:
            jwks_server.serve({"error": "down"}, status=500)
            keys = await source.keys_for("rsa-2")
            assert keys.key_ids() == {"rsa-1", "ec-1"}
            assert jwks_server.hits >= 3  # retried with backoff before giving up
            jwks_server.serve({"not": "a jwks"})  # a 200 that is no JWKS fails the same way
            keys = await source.keys_for("rsa-3")
            assert keys.key_ids() == {"rsa-1", "ec-1"}
        finally:
            await source.close()

    asyncio.run(scenario())
    assert any("keeping the previous keys" in r.getMessage() for r in caplog.records)


def test_a_slow_fetch_does_not_block_the_event_loop(jwks_server: JwksServer) -> None:
    async def scenario() -> None:
        source = JwksSource(jwks_server.url, cafile=jwks_server.cafile)
        await source.start()
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        task = asyncio.create_task(ticker())
        try:
            jwks_server.serve(jwks_document(), delay=0.5)
            await source.keys_for("rsa-2")
            assert ticks >= 20  # ~50 possible in 0.5 s; a blocked loop would give 0
        finally:
            task.cancel()
            await source.close()

    asyncio.run(scenario())


def test_cancelled_caller_does_not_cancel_the_refresh(jwks_server: JwksServer) -> None:
    async def scenario() -> None:
        source = JwksSource(jwks_server.url, cafile=jwks_server.cafile)
        await source.start()
        try:
            jwks_server.serve(jwks_document(), delay=0.3)
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(source.keys_for("rsa-2"), 0.05)
            deadline = time.monotonic() + 5
            while "rsa-2" not in source.keys.key_ids() and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            assert "rsa-2" in source.keys.key_ids()
        finally:
            await source.close()

    asyncio.run(scenario())


def test_public_jwk_helper_round_trips() -> None:
    jwk = public_jwk(session_keys().ec_1, "x", use="sig")
    assert parse_jwks(json.dumps({"keys": [jwk]})).keys[0].crv == "P-256"
