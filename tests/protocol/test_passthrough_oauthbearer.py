"""An OAUTHBEARER login passed through (``protocol.passthrough.OAuthBearerPassthroughServer``) is the broker's: the
client's initial response goes up unchanged, Kafka's error challenge and the client's ``%x01`` to it too, and only a
token the broker accepted is read — unverified, bounded — for the principal (the configured sub claim) and groups.
A token the broker accepted but kafkaguard cannot read fails closed; nothing here logs or keeps a token."""

from __future__ import annotations

import asyncio
import base64
import json
import logging

import pytest
from kio.schema.errors import ErrorCode

from kafkaguard.identity.failure_budget import LoginFailureBudget
from kafkaguard.identity.oauth import MAX_UNVERIFIED_TOKEN_CHARS, TokenExpectations, TokenRejected
from kafkaguard.identity.oauth import accepted_token_claims as claims_of
from kafkaguard.protocol.mechanisms import Authenticated, Challenge, Failed
from kafkaguard.protocol.passthrough import LoginUnavailable, OAuthBearerPassthroughServer, RelayedAnswer
from tests.protocol.test_passthrough import CLIENT, Broker, ok, steps

INVALID = b'{"status":"invalid_token"}'


def unsigned(claims: object, header: object = None) -> str:
    """A JWT-shaped token with these claims and a junk signature (the broker, here a script, decides validity)."""

    def part(value: object) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{part(header or {'alg': 'RS256', 'kid': 'k'})}.{part(claims)}.c2lnbmF0dXJl"


def response(token: str, authzid: str = "") -> bytes:
    return f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {token}\x01\x01".encode()


def server(
    broker: Broker, limits: LoginFailureBudget | None = None, **expectations: str
) -> OAuthBearerPassthroughServer:
    budget = limits or LoginFailureBudget(address_burst=10, user_burst=10)
    return OAuthBearerPassthroughServer(broker, budget, CLIENT, TokenExpectations(**expectations))  # type: ignore[arg-type]


def test_an_accepted_token_is_the_broker_s_principal_by_the_sub_claim() -> None:
    token = unsigned({"sub": " alice ", "email": "a@example.test", "groups": ["ops", "ops", "dev"]})
    broker = Broker([ok(lifetime_ms=42_000)])
    (done,) = steps(server(broker, groups_claim="groups"), response(token))
    assert isinstance(done, Authenticated)
    assert done.login.user == "alice"  # trimmed, as Kafka's ClaimValidationUtils
    assert done.login.groups == ("Group:ops", "Group:dev")
    assert done.login.relayed_lifetime_ms == 42_000 and done.login.expires_at_ms is None  # the broker's lifetime
    assert broker.received == [("OAUTHBEARER", response(token), True)]  # relayed as sent, after a handshake
    (other,) = steps(server(Broker([ok()]), sub_claim_name="email"), response(token))
    assert isinstance(other, Authenticated) and other.login.user == "a@example.test" and other.login.groups == ()


def test_a_refused_token_is_kafka_s_challenge_then_kafka_s_refusal() -> None:
    token = unsigned({"sub": "mallory"})
    refusal = RelayedAnswer(int(ErrorCode.sasl_authentication_failed), INVALID.decode(), b"")
    broker = Broker([ok(INVALID), refusal])
    limits = LoginFailureBudget(address_burst=1, user_burst=10)
    oauth = server(broker, limits)
    challenge, failed = steps(oauth, response(token), b"\x01")
    assert isinstance(challenge, Challenge) and challenge.token == INVALID
    assert isinstance(failed, Failed) and failed.relayed and failed.message == INVALID.decode()
    assert failed.error_code == int(ErrorCode.sasl_authentication_failed)
    assert broker.received[1] == ("OAUTHBEARER", b"\x01", False)
    assert oauth.claimed_user is None  # a refused token is never read
    # the address's one failed login is spent: the next token is refused before it reaches the broker
    again = Broker([])
    (throttled,) = steps(server(again, limits), response(token))
    assert isinstance(throttled, Failed) and throttled.throttled and again.received == []


def test_a_broker_s_direct_refusal_is_passed_on() -> None:
    answer = RelayedAnswer(int(ErrorCode.illegal_sasl_state), "broker says no", b"")
    (failed,) = steps(server(Broker([answer])), response(unsigned({"sub": "x"})))
    assert isinstance(failed, Failed) and failed.error_code == int(ErrorCode.illegal_sasl_state)
    assert failed.message == "broker says no" and failed.relayed


@pytest.mark.parametrize(
    "token",
    [
        unsigned({"name": "no sub claim"}),
        unsigned({"sub": 7}),
        unsigned({"sub": "   "}),
        unsigned({"sub": "a", "groups": {"not": "a list"}}),
        "only.two",
        "a.!!!.c",
        unsigned(["not", "an", "object"]),
        "h." + "A" * MAX_UNVERIFIED_TOKEN_CHARS + ".s",
    ],
    ids=["no-sub", "sub-number", "sub-blank", "groups-shape", "two-sections", "not-base64", "not-object", "huge"],
)
def test_a_token_the_broker_accepted_but_kafkaguard_cannot_read_fails_closed(
    token: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    (failed,) = steps(server(Broker([ok()]), groups_claim="groups"), response(token))
    assert isinstance(failed, Failed) and not failed.relayed
    assert failed.message.startswith("Authentication failed: the accepted token's principal could not be read")
    assert token not in failed.message and token not in caplog.text  # the token is never said


def test_a_malformed_initial_response_the_broker_accepted_fails_closed() -> None:
    (failed,) = steps(server(Broker([ok()])), b"not an oauthbearer response")
    assert isinstance(failed, Failed) and "could not be read" in failed.message


def test_an_acknowledgement_the_broker_accepted_fails_closed() -> None:
    token = unsigned({"sub": "x"})
    challenge, failed = steps(server(Broker([ok(INVALID), ok()])), response(token), b"\x01")
    assert isinstance(challenge, Challenge) and isinstance(failed, Failed) and not failed.relayed


def test_the_size_bound_comes_before_any_decoding() -> None:
    with pytest.raises(TokenRejected, match="longer than"):
        claims_of("x" * (MAX_UNVERIFIED_TOKEN_CHARS + 1), TokenExpectations())
    principal, groups = claims_of(unsigned({"sub": "bob", "realm": {"roles": ["r"]}}),
                                  TokenExpectations(groups_claim="realm.roles"))  # fmt: skip
    assert (principal, groups) == ("bob", ("r",))


def test_a_broker_that_cannot_be_asked_gives_the_attempt_back() -> None:
    limits = LoginFailureBudget(address_burst=1, user_burst=10)

    async def run() -> None:
        with pytest.raises(LoginUnavailable):
            await server(Broker([], down=True), limits).step(response(unsigned({"sub": "x"})))

    asyncio.run(run())
    (done,) = steps(server(Broker([ok()]), limits), response(unsigned({"sub": "x"})))
    assert isinstance(done, Authenticated)
