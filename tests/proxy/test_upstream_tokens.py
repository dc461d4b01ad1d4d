"""``proxy.upstream_tokens.AccessTokenSource`` against a client-credentials token endpoint on 127.0.0.1
(``tests.kafka.tokens``): what it sends, caching, refresh at 80% of the lifetime, a failed refresh that keeps the
still-valid token, retries with backoff, and failures that name the problem but never the secret."""

from __future__ import annotations

import asyncio
import base64
import logging
import socket
from collections.abc import Iterator

import pytest

from kafkaguard.proxy.oauthbearer_client import oauthbearer_error_status, oauthbearer_initial_response
from kafkaguard.proxy.upstream import UpstreamUnavailable
from kafkaguard.proxy.upstream_tokens import AccessTokenSource
from tests.kafka.tokens import SigningKey, TokenEndpoint

CLIENT_ID = "kafkaguard proxy"  # a space: the Basic credentials are form-encoded first, as Kafka's client does
SECRET = "s3cret:with/odd&chars"  # noqa: S105 - the test endpoint's client secret


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds
        await asyncio.sleep(0)


@pytest.fixture(scope="module")
def key() -> SigningKey:
    return SigningKey.create("unit-key")


@pytest.fixture
def endpoint(key: SigningKey) -> Iterator[TokenEndpoint]:
    with TokenEndpoint(key, {CLIENT_ID: SECRET}, lifetime=100.0) as running:
        yield running


def source(endpoint: TokenEndpoint, clock: Clock, secret: str = SECRET, *, retry_backoff: float = 0.01,
           retry_backoff_max: float = 0.2) -> AccessTokenSource:  # fmt: skip
    return AccessTokenSource(endpoint.url, CLIENT_ID, secret, scope="kafka write", clock=clock,
                             retry_backoff=retry_backoff, retry_backoff_max=retry_backoff_max)  # fmt: skip


def test_it_asks_with_the_client_credentials_grant_and_caches_the_token(endpoint: TokenEndpoint) -> None:
    clock = Clock()
    tokens = source(endpoint, clock)

    async def twice() -> tuple[str, str]:
        return await tokens.token(), await tokens.token()

    first, second = asyncio.run(twice())
    assert first == second == endpoint.issued[0]
    assert len(endpoint.requests) == 1
    request = endpoint.requests[0]
    assert request.client_id == CLIENT_ID and request.authenticated
    assert request.form == {"grant_type": "client_credentials", "scope": "kafka write"}


def test_a_token_is_refreshed_once_80_percent_of_its_lifetime_has_passed(endpoint: TokenEndpoint) -> None:
    clock = Clock()
    tokens = source(endpoint, clock)

    async def run() -> list[str]:
        seen = [await tokens.token()]
        clock.now += 79.0
        seen.append(await tokens.token())  # 79% of 100 s: the same
        clock.now += 2.0
        seen.append(await tokens.token())  # 81%: a new one
        return seen

    seen = asyncio.run(run())
    assert seen[0] == seen[1] != seen[2]
    assert seen == [endpoint.issued[0], endpoint.issued[0], endpoint.issued[1]]


def test_concurrent_logins_share_one_fetch(endpoint: TokenEndpoint) -> None:
    tokens = source(endpoint, Clock())

    async def many() -> list[str]:
        return list(await asyncio.gather(*(tokens.token() for _ in range(10))))

    assert set(asyncio.run(many())) == {endpoint.issued[0]}
    assert len(endpoint.requests) == 1


def test_a_failed_refresh_keeps_the_valid_token_and_tries_again_after_a_backoff(
    endpoint: TokenEndpoint, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    tokens = source(endpoint, clock, retry_backoff=5.0, retry_backoff_max=60.0)

    async def run() -> list[str]:
        seen = [await tokens.token()]
        clock.now += 85.0
        endpoint.fail_with = 503
        seen.append(await tokens.token())  # refresh fails: the old one, still valid for 15 s
        clock.now += 1.0
        seen.append(await tokens.token())  # within the backoff (5 s): not asked again
        endpoint.fail_with = None
        clock.now += 5.0
        seen.append(await tokens.token())  # after it: a new one
        return seen

    with caplog.at_level(logging.WARNING, logger="kafkaguard.proxy.upstream_tokens"):
        seen = asyncio.run(run())
    assert seen[:3] == [endpoint.issued[0]] * 3
    assert seen[3] == endpoint.issued[1]
    assert len(endpoint.requests) == 3
    assert "cannot refresh the upstream OAuth token" in caplog.text and "HTTP 503" in caplog.text
    assert SECRET not in caplog.text and endpoint.issued[0] not in caplog.text


def test_without_a_token_a_failing_endpoint_is_retried_with_backoff_then_fails(
    endpoint: TokenEndpoint, caplog: pytest.LogCaptureFixture
) -> None:
    endpoint.fail_with = 503
    clock = Clock()  # advanced by the backoff's sleeps only: the count below does not depend on the machine's speed
    tokens = AccessTokenSource(endpoint.url, CLIENT_ID, SECRET, clock=clock, sleep=clock.sleep, retry_backoff=0.01,
                               retry_backoff_max=0.1)  # fmt: skip
    with caplog.at_level(logging.WARNING), pytest.raises(UpstreamUnavailable) as failure:
        asyncio.run(tokens.token())
    # 0.01 + 0.02 + 0.04 s of backoff fit under 0.1 s; a fourth wait (0.08 s more) would not
    assert len(endpoint.requests) == 4
    assert clock.now == pytest.approx(1000.07)
    assert str(failure.value).startswith(f"cannot get an OAuth token from {endpoint.url} for client {CLIENT_ID}")
    assert "HTTP 503: temporarily_unavailable (down for a test)" in str(failure.value)
    assert SECRET not in caplog.text + str(failure.value)


def test_a_wrong_secret_is_not_retried_and_the_error_names_the_refusal(
    endpoint: TokenEndpoint, caplog: pytest.LogCaptureFixture
) -> None:
    tokens = source(endpoint, Clock(), secret="wrong-secret")  # noqa: S106 - a wrong one, on purpose
    with caplog.at_level(logging.WARNING), pytest.raises(UpstreamUnavailable, match="HTTP 401: invalid_client"):
        asyncio.run(tokens.token())
    assert len(endpoint.requests) == 1
    assert "wrong-secret" not in caplog.text
    assert base64.b64encode(b"wrong").decode()[:4] not in caplog.text  # no Authorization header either


def test_an_unreachable_endpoint_fails_clearly() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed once the block ends: nothing listens there
    tokens = AccessTokenSource(f"http://127.0.0.1:{port}/token", CLIENT_ID, SECRET, retry_backoff=0.01,
                               retry_backoff_max=0.05)  # fmt: skip
    with pytest.raises(UpstreamUnavailable, match="ConnectError"):
        asyncio.run(tokens.token())


def test_the_lifetime_comes_from_the_tokens_exp_claim_when_expires_in_is_missing(key: SigningKey) -> None:
    clock = Clock()

    class NoExpiresIn(TokenEndpoint):
        @staticmethod
        def _send(handler, status, document):
            document.pop("expires_in", None)
            TokenEndpoint._send(handler, status, document)

    with NoExpiresIn(key, {CLIENT_ID: SECRET}, lifetime=100.0) as endpoint:
        tokens = source(endpoint, clock)
        asyncio.run(tokens.token())
        assert tokens.current is not None
        assert 98.0 <= tokens.current.expires_at - clock.now <= 100.0
        assert 78.0 <= tokens.current.refresh_at - clock.now <= 80.0


def test_the_source_never_shows_its_secret() -> None:
    tokens = AccessTokenSource("https://idp.example/token", CLIENT_ID, SECRET)
    assert SECRET not in repr(tokens) and SECRET not in str(tokens)
    assert repr(tokens) == f"AccessTokenSource(url='https://idp.example/token', client_id='{CLIENT_ID}')"


def test_the_oauthbearer_messages_are_kafkas() -> None:
    assert oauthbearer_initial_response("abc.def.ghi") == b"n,,\x01auth=Bearer abc.def.ghi\x01\x01"
    assert oauthbearer_error_status(b'{"status":"invalid_token"}') == "invalid_token"
    assert oauthbearer_error_status(b"not json") == "b'not json'"
