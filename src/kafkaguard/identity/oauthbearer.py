"""The server side of SASL/OAUTHBEARER (RFC 7628, Kafka's ``OAuthBearerSaslServer``): an I/O-free state machine.
Validating the token is the caller's step (it may await a JWKS refresh), so an exchange is two calls::

    session = OAuthBearerServerSession()
    response = session.receive_client_response(auth_bytes)   # CLIENT_RESPONSE -> VALIDATING
    keys = await jwks.keys_for(token_key_id(response.token.value))
    try:
        outcome = validate_token(response.token.value, keys, expectations, now_ms)
    except TokenRejected as e:
        log.info("OAUTHBEARER token refused: %s", e)     # never the token
        outcome = e
    challenge = session.receive_validation(outcome)      # valid: b"", AUTHENTICATED
                                                         # invalid: b'{"status":"invalid_token"}', ERROR_SENT
    # ERROR_SENT: the challenge goes back in SaslAuthenticate (error NONE); the client answers b"\\x01", and
    session.receive_client_response(b"\\x01")            # raises OAuthBearerAuthenticationError('{"status":...}')

Kafka's rules, kept here:

* The initial response is ``n,[a=<authzid>],`` ``\\x01`` then ``key=value\\x01`` pairs then ``\\x01``, matched in
  full by Kafka's regular expression (``OAuthBearerClientInitialResponse``); ``auth`` must be there and be
  ``<scheme> <token>`` with the scheme ``Bearer`` (any case); the other pairs are SASL extensions (a later
  duplicate wins; Kafka's validator accepts every extension). The authzid is compared as sent (``=2C`` is not
  decoded), and, when not empty, must equal the token's principal.
* A malformed response raises :class:`~kafkaguard.errors.OAuthBearerProtocolError` (Kafka's ``SaslException``:
  the client is told only the generic ``client_message``); an authzid mismatch or the ``\\x01`` after an error
  challenge raises :class:`~kafkaguard.errors.OAuthBearerAuthenticationError` whose ``client_message`` is Kafka's
  message, sent in SaslAuthenticate's error message with SASL_AUTHENTICATION_FAILED.
* After an error challenge, anything but a lone ``\\x01`` is read as a new initial response (as Kafka does).

Where this differs from Kafka: a scheme other than Bearer makes Kafka's parser throw an IllegalArgumentException (it
asks the wrong matcher for the ``scheme`` group), which closes the connection without an answer; here it is a
protocol error with the message Kafka meant to send.

Secrets: the token appears in no repr, message or log line (:class:`BearerToken` masks itself).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType

from kafkaguard.errors import OAuthBearerAuthenticationError, OAuthBearerProtocolError, OAuthBearerStateError
from kafkaguard.identity.oauth import TokenRejected, ValidatedToken

MECHANISM = "OAUTHBEARER"
SEPARATOR = "\x01"
#: Kafka's regular expressions (OAuthBearerClientInitialResponse), in Python's syntax: ``[\x01-\x7F&&[^=,]]`` is
#: written out as ranges, and ``\w`` is ASCII-only as in Java.
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_KEY = r"[A-Za-z]+"
_VALUE = r"[\x21-\x7E \t\r\n]+"
_KVPAIRS = f"(?:{_KEY}={_VALUE}{SEPARATOR})*"
_CLIENT_INITIAL_RESPONSE = re.compile(
    f"n,(?:a=(?P<authzid>{_SASLNAME}))?,{SEPARATOR}(?P<kvpairs>{_KVPAIRS}){SEPARATOR}"
)
_AUTH = re.compile(r"(?P<scheme>\w+)[ ]+(?P<token>[-_~+/.a-zA-Z0-9]+(?:=*))", re.ASCII)

#: Kafka's jsonErrorResponse for a token its validator refused (status only: Kafka sets neither scope nor
#: openid-configuration).
INVALID_TOKEN_CHALLENGE = '{"status":"invalid_token"}'  # noqa: S105 - a status, not a secret


class BearerToken:
    """The token as the client sent it. Its repr and str are masked; read ``value`` only to validate it."""

    __slots__ = ("value",)

    def __init__(self, value: str) -> None:
        self.value = value

    def __repr__(self) -> str:
        return "BearerToken('**********')"

    __str__ = __repr__


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientInitialResponse:
    """A parsed OAUTHBEARER client initial response."""

    token: BearerToken
    authorization_id: str  # "" when the client sent no a=
    extensions: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


def parse_client_initial_response(message: bytes) -> ClientInitialResponse:
    """Kafka's ``OAuthBearerClientInitialResponse(byte[])``.

    :raises OAuthBearerProtocolError: Kafka's message for what is wrong.
    """
    text = message.decode("utf-8", errors="replace")
    matched = _CLIENT_INITIAL_RESPONSE.fullmatch(text)
    if matched is None:
        raise OAuthBearerProtocolError("Invalid OAUTHBEARER client first message")
    properties: dict[str, str] = {}
    for pair in matched["kvpairs"].split(SEPARATOR):
        if pair:
            key, value = pair.split("=", 1)
            properties[key] = value
    auth = properties.pop("auth", None)
    if auth is None:
        raise OAuthBearerProtocolError("Invalid OAUTHBEARER client first message: 'auth' not specified")
    auth_matched = _AUTH.fullmatch(auth)
    if auth_matched is None:
        raise OAuthBearerProtocolError("Invalid OAUTHBEARER client first message: invalid 'auth' format")
    if auth_matched["scheme"].lower() != "bearer":
        raise OAuthBearerProtocolError(f"Invalid scheme in OAUTHBEARER client first message: {auth_matched['scheme']}")
    return ClientInitialResponse(
        token=BearerToken(auth_matched["token"]),
        authorization_id=matched["authzid"] or "",
        extensions=MappingProxyType(properties),
    )


class OAuthBearerServerStage(Enum):
    """Where an :class:`OAuthBearerServerSession` is; the value names the method expected next."""

    CLIENT_RESPONSE = "receive_client_response"
    VALIDATING = "receive_validation"
    ERROR_SENT = "receive_client_response (b'\\x01', or a new initial response)"
    AUTHENTICATED = "validated_token"
    FAILED = "nothing (the exchange failed; start a new session)"


class OAuthBearerServerSession:
    """One OAUTHBEARER exchange, server side. Not thread-safe; one session per connection and authentication."""

    __slots__ = ("_error_message", "_response", "_stage", "_validated")

    def __init__(self) -> None:
        self._stage = OAuthBearerServerStage.CLIENT_RESPONSE
        self._response: ClientInitialResponse | None = None
        self._validated: ValidatedToken | None = None
        self._error_message: str | None = None

    def __repr__(self) -> str:
        principal = None if self._validated is None else self._validated.principal_name
        return f"OAuthBearerServerSession(stage={self._stage.name}, principal={principal!r})"

    __str__ = __repr__

    @property
    def stage(self) -> OAuthBearerServerStage:
        return self._stage

    @property
    def validated_token(self) -> ValidatedToken:
        """The token's principal, scopes, lifetime and groups, once authenticated.

        :raises OAuthBearerStateError: the exchange has not (successfully) completed.
        """
        if self._stage is not OAuthBearerServerStage.AUTHENTICATED or self._validated is None:
            raise self._state_error("validated_token")
        return self._validated

    @property
    def extensions(self) -> Mapping[str, str]:
        """The SASL extensions the client sent (every one is accepted, as Kafka's validator does).

        :raises OAuthBearerStateError: the exchange has not (successfully) completed.
        """
        if self._stage is not OAuthBearerServerStage.AUTHENTICATED or self._response is None:
            raise self._state_error("extensions")
        return self._response.extensions

    def receive_client_response(self, message: bytes) -> ClientInitialResponse:
        """Read the client's response: the initial response (its token is then to be validated), or, after an
        error challenge, the client's ``\\x01`` (which fails the exchange with the challenge as message).

        :raises OAuthBearerProtocolError: a malformed initial response.
        :raises OAuthBearerAuthenticationError: ``\\x01`` after the error challenge.
        :raises OAuthBearerStateError: not the expected step.
        """
        if self._stage not in (OAuthBearerServerStage.CLIENT_RESPONSE, OAuthBearerServerStage.ERROR_SENT):
            raise self._state_error("receive_client_response")
        error_message, self._error_message = self._error_message, None
        if message == SEPARATOR.encode() and error_message is not None:
            self._fail()
            raise OAuthBearerAuthenticationError(error_message, client_message=error_message)
        try:
            response = parse_client_initial_response(message)
        except OAuthBearerProtocolError:
            self._fail()
            raise
        self._response = response
        self._stage = OAuthBearerServerStage.VALIDATING
        return response

    def receive_validation(self, outcome: ValidatedToken | TokenRejected) -> bytes:
        """Answer with the validation's outcome: ``b""`` when valid (authenticated), Kafka's
        ``{"status":"invalid_token"}`` challenge when not.

        :raises OAuthBearerAuthenticationError: the authzid is not the token's principal (Kafka's message).
        :raises OAuthBearerStateError: not the expected step.
        """
        response = self._response
        if self._stage is not OAuthBearerServerStage.VALIDATING or response is None:
            raise self._state_error("receive_validation")
        if isinstance(outcome, TokenRejected):
            self._error_message = INVALID_TOKEN_CHALLENGE
            self._stage = OAuthBearerServerStage.ERROR_SENT
            return INVALID_TOKEN_CHALLENGE.encode()
        if response.authorization_id and response.authorization_id != outcome.principal_name:
            self._fail()
            message = (
                f"Authentication failed: Client requested an authorization id ({response.authorization_id}) that is "
                f"different from the token's principal name ({outcome.principal_name})"
            )
            raise OAuthBearerAuthenticationError(message, client_message=message)
        self._validated = outcome
        self._stage = OAuthBearerServerStage.AUTHENTICATED
        return b""

    def _state_error(self, called: str) -> OAuthBearerStateError:
        return OAuthBearerStateError(
            f"OAUTHBEARER server session: {called} is not allowed in stage {self._stage.name}; "
            f"the next step is {self._stage.value}"
        )

    def _fail(self) -> None:
        self._stage = OAuthBearerServerStage.FAILED
        self._response = None
