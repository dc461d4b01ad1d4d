"""The OAUTHBEARER server session: Kafka's client initial response grammar and messages, the invalid_token
challenge and the client's ``\\x01``, the authzid rule, and that the token never shows."""

from __future__ import annotations

import json

import pytest

from kafkaguard.errors import (
    OAUTHBEARER_GENERIC_FAILURE_MESSAGE,
    OAuthBearerAuthenticationError,
    OAuthBearerProtocolError,
    OAuthBearerStateError,
)
from kafkaguard.identity.jwks import parse_jwks
from kafkaguard.identity.oauth import TokenRejected, ValidatedToken, validate_token
from kafkaguard.identity.oauthbearer import (
    INVALID_TOKEN_CHALLENGE,
    BearerToken,
    OAuthBearerServerSession,
    OAuthBearerServerStage,
    parse_client_initial_response,
)
from tests.identity.tokens import EXPECTATIONS, claims, jwks_document, session_keys, sign

TOKEN = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJl"  # noqa: S105 - an unsigned test token
ALICE = ValidatedToken(principal_name="alice", scopes=frozenset({"s"}), expires_at_ms=2_000, issued_at_ms=1_000)


def stage(session: OAuthBearerServerSession) -> OAuthBearerServerStage:
    """The session's stage, read through a call so the type checker does not narrow it between steps."""
    return session.stage


def initial(token: str = TOKEN, authzid: str = "", extensions: str = "") -> bytes:
    """What Kafka's client sends (OAuthBearerClientInitialResponse.toBytes)."""
    a = f"a={authzid}" if authzid else ""
    return f"n,{a},\x01auth=Bearer {token}{extensions}\x01\x01".encode()


def test_valid_token_authenticates() -> None:
    session = OAuthBearerServerSession()
    response = session.receive_client_response(initial())
    assert response.token.value == TOKEN
    assert response.authorization_id == ""
    assert stage(session) is OAuthBearerServerStage.VALIDATING
    assert session.receive_validation(ALICE) == b""
    assert stage(session) is OAuthBearerServerStage.AUTHENTICATED
    assert session.validated_token == ALICE
    assert dict(session.extensions) == {}


def test_extensions_are_kept_and_a_later_duplicate_wins() -> None:
    session = OAuthBearerServerSession()
    session.receive_client_response(initial(extensions="\x01traceId=a=b c\x01traceId=second\x01logicalCluster=lc-1"))
    session.receive_validation(ALICE)
    assert dict(session.extensions) == {"traceId": "second", "logicalCluster": "lc-1"}


def test_pairs_before_auth_are_extensions_too() -> None:
    response = parse_client_initial_response(f"n,,\x01host=h\x01auth=bearer {TOKEN}\x01\x01".encode())
    assert response.token.value == TOKEN  # the scheme is matched in any case
    assert dict(response.extensions) == {"host": "h"}


def test_authzid_equal_to_the_principal_is_accepted() -> None:
    session = OAuthBearerServerSession()
    assert session.receive_client_response(initial(authzid="alice")).authorization_id == "alice"
    assert session.receive_validation(ALICE) == b""


def test_authzid_other_than_the_principal_fails_with_kafkas_message() -> None:
    session = OAuthBearerServerSession()
    session.receive_client_response(initial(authzid="bob"))
    with pytest.raises(OAuthBearerAuthenticationError) as failed:
        session.receive_validation(ALICE)
    expected = (
        "Authentication failed: Client requested an authorization id (bob) that is different from the token's "
        "principal name (alice)"
    )
    assert failed.value.client_message == expected
    assert stage(session) is OAuthBearerServerStage.FAILED


def test_authzid_is_compared_as_sent() -> None:
    response = parse_client_initial_response(initial(authzid="a=2Cb"))
    assert response.authorization_id == "a=2Cb"


def test_invalid_token_gets_the_challenge_then_the_ack_fails_with_it() -> None:
    session = OAuthBearerServerSession()
    session.receive_client_response(initial())
    challenge = session.receive_validation(TokenRejected("expired"))
    assert challenge == b'{"status":"invalid_token"}'
    assert json.loads(challenge) == {"status": "invalid_token"}
    assert stage(session) is OAuthBearerServerStage.ERROR_SENT
    with pytest.raises(OAuthBearerAuthenticationError) as failed:
        session.receive_client_response(b"\x01")
    assert failed.value.client_message == INVALID_TOKEN_CHALLENGE
    assert not isinstance(failed.value, OAuthBearerProtocolError)
    assert stage(session) is OAuthBearerServerStage.FAILED
    with pytest.raises(OAuthBearerStateError):
        session.receive_client_response(initial())


def test_after_the_challenge_a_new_initial_response_is_read() -> None:
    session = OAuthBearerServerSession()
    session.receive_client_response(initial("first.token.x"))
    session.receive_validation(TokenRejected("bad"))
    assert session.receive_client_response(initial("second.token.y")).token.value == "second.token.y"
    assert session.receive_validation(ALICE) == b""


def test_ack_without_a_challenge_is_a_malformed_response() -> None:
    with pytest.raises(OAuthBearerProtocolError, match=r"^Invalid OAUTHBEARER client first message$") as failed:
        OAuthBearerServerSession().receive_client_response(b"\x01")
    assert failed.value.client_message == OAUTHBEARER_GENERIC_FAILURE_MESSAGE


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        (b"", "Invalid OAUTHBEARER client first message"),
        (f"n,,\x01auth=Bearer {TOKEN}\x01".encode(), "Invalid OAUTHBEARER client first message"),  # one \x01 short
        (f"y,,\x01auth=Bearer {TOKEN}\x01\x01".encode(), "Invalid OAUTHBEARER client first message"),
        (f"n,a=x=y,\x01auth=Bearer {TOKEN}\x01\x01".encode(), "Invalid OAUTHBEARER client first message"),
        (f"n,,\x01auth=Bearer {TOKEN}\x01key1=v\x01\x01".encode(), "Invalid OAUTHBEARER client first message"),
        (f"n,,\x01auth=Bearer {TOKEN}\x01k=\x01\x01".encode(), "Invalid OAUTHBEARER client first message"),
        ("n,,\x01auth=Bearer tök\x01\x01".encode(), "Invalid OAUTHBEARER client first message"),
        (b"n,,\x01host=h\x01\x01", "Invalid OAUTHBEARER client first message: 'auth' not specified"),
        (b"n,,\x01\x01", "Invalid OAUTHBEARER client first message: 'auth' not specified"),
        (b"n,,\x01auth=Bearer\x01\x01", "Invalid OAUTHBEARER client first message: invalid 'auth' format"),
        (b"n,,\x01auth=Bearer a b\x01\x01", "Invalid OAUTHBEARER client first message: invalid 'auth' format"),
        (b"n,,\x01auth=Bearer a=b\x01\x01", "Invalid OAUTHBEARER client first message: invalid 'auth' format"),
        (b"n,,\x01auth=Basic abc\x01\x01", "Invalid scheme in OAUTHBEARER client first message: Basic"),
    ],
)
def test_malformed_responses_get_kafkas_reason_and_the_generic_client_message(message: bytes, reason: str) -> None:
    session = OAuthBearerServerSession()
    with pytest.raises(OAuthBearerProtocolError) as failed:
        session.receive_client_response(message)
    assert str(failed.value) == reason
    assert failed.value.client_message == OAUTHBEARER_GENERIC_FAILURE_MESSAGE
    assert stage(session) is OAuthBearerServerStage.FAILED


@pytest.mark.parametrize("token", ["abc", "a-b_c~d+e/f.g", "abc==", "AbC09"])
def test_token_characters_are_kafkas(token: str) -> None:
    assert parse_client_initial_response(initial(token)).token.value == token


def test_steps_out_of_order_are_state_errors() -> None:
    session = OAuthBearerServerSession()
    with pytest.raises(OAuthBearerStateError, match="next step is receive_client_response"):
        session.receive_validation(ALICE)
    with pytest.raises(OAuthBearerStateError):
        _ = session.validated_token
    session.receive_client_response(initial())
    with pytest.raises(OAuthBearerStateError):
        session.receive_client_response(initial())
    with pytest.raises(OAuthBearerStateError):
        _ = session.extensions


def test_the_token_never_shows() -> None:
    session = OAuthBearerServerSession()
    response = session.receive_client_response(initial(authzid="bob"))
    shown = [repr(session), str(session), repr(response), str(response), repr(response.token), str(response.token)]
    with pytest.raises(OAuthBearerAuthenticationError) as failed:
        session.receive_validation(ALICE)
    shown += [str(failed.value), failed.value.client_message, repr(session)]
    for text in shown:
        assert TOKEN not in text
        assert TOKEN.split(".")[1] not in text
    assert repr(BearerToken("secret")) == "BearerToken('**********')"


def test_end_to_end_with_a_real_token() -> None:
    keys = parse_jwks(json.dumps(jwks_document()))
    now = 1_800_000_000
    outcomes: list[bytes] = []
    for token in (sign(claims(now), session_keys().rsa_1), sign(claims(now, exp=now - 100), session_keys().rsa_1)):
        session = OAuthBearerServerSession()
        response = session.receive_client_response(initial(token, authzid="alice"))
        outcome: ValidatedToken | TokenRejected
        try:
            outcome = validate_token(response.token.value, keys, EXPECTATIONS, now * 1000)
        except TokenRejected as e:
            outcome = e
        outcomes.append(session.receive_validation(outcome))
    assert outcomes == [b"", b'{"status":"invalid_token"}']
