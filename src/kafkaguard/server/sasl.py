"""SASL on a connection: SaslHandshake (17) then SCRAM tokens, in SaslAuthenticate (36) requests or — after a v0
handshake — as raw frames (SEMANTICS.md §11.5).

States: HANDSHAKE (nothing yet) → AUTHENTICATING (mechanism chosen) → AUTHENTICATED, or FAILED (the connection
closes after the configured delay). The SCRAM maths live in ``kafkaguard.scram.server``; this module only moves
tokens and turns outcomes into Kafka responses. Credentials and the unknown-user decoy's shape come from the
``CredentialService``'s in-memory snapshot, so nothing here waits on the store.

``record_login`` counts a finished login (``Services.logins``) and logs it as Kafka's ``Selector`` does: a failure
at INFO, ``Failed authentication with /<address> (...)``, naming the listener, the mechanism, the user name the
client claimed and the reason sent to the client (never a password, a proof or a key); a success at DEBUG.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta
from enum import Enum, auto
from typing import Any

from kio.schema.errors import ErrorCode

from kafkaguard.audit.logins import LoginStatistics
from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.errors import ScramAuthenticationError, ScramStateError
from kafkaguard.scram import ScramMechanism
from kafkaguard.scram.server import ScramServerSession, ScramServerStage
from kafkaguard.server.build import build
from kafkaguard.server.codec import response_schema
from kafkaguard.service.credentials import CredentialService

log = logging.getLogger(__name__)

#: Longest part of a claimed user name that a log line shows (the rest is elided: it is client input).
_LOGGED_NAME_CHARS = 128


class SaslStage(Enum):
    HANDSHAKE = auto()
    AUTHENTICATING = auto()
    AUTHENTICATED = auto()
    FAILED = auto()


@dataclass
class SaslOutcome:
    """What to send back and what happens next. ``failed``: answer after the failure delay, then close."""

    response: Any
    failed: bool = False
    close: bool = False


class SaslState:
    def __init__(self, enabled: list[str], credentials: CredentialService, server_secret: bytes) -> None:
        self.stage = SaslStage.HANDSHAKE
        self.raw_tokens = False  # after a v0 handshake, tokens come as raw frames
        self.user: str | None = None
        #: Why the login failed (the message sent to the client), once it has.
        self.failure: str | None = None
        self._enabled = enabled
        self._credentials = credentials
        self._secret = server_secret
        self._session: ScramServerSession | None = None

    @property
    def authenticated(self) -> bool:
        return self.stage is SaslStage.AUTHENTICATED

    @property
    def mechanism(self) -> str | None:
        """The SASL mechanism chosen in the handshake, or None before it."""
        return None if self._session is None else self._session.mechanism.mechanism_name

    @property
    def claimed_user(self) -> str | None:
        """The user name the client sent in client-first (authenticated or not), or None before it."""
        return None if self._session is None else self._session.username

    def handshake(self, api_version: int, request: Any) -> SaslOutcome:
        cls = response_schema(ApiKey.SASL_HANDSHAKE, api_version)
        mechanisms = tuple(self._enabled)
        if self.stage is not SaslStage.HANDSHAKE:
            return SaslOutcome(build(cls, error_code=ErrorCode.illegal_sasl_state, mechanisms=mechanisms), close=True)
        name = str(request.mechanism)
        if name not in self._enabled:
            log.info("SASL handshake for unsupported mechanism %r", name)
            return SaslOutcome(
                build(cls, error_code=ErrorCode.unsupported_sasl_mechanism, mechanisms=mechanisms), close=True
            )
        mechanism = ScramMechanism.from_name(name)
        self._session = ScramServerSession(
            mechanism,
            self._credentials.lookup_for(mechanism),
            decoy_secret=self._secret,
            decoy_profile=self._credentials.decoy_profile(mechanism),
        )
        self.stage = SaslStage.AUTHENTICATING
        self.raw_tokens = api_version == 0
        return SaslOutcome(build(cls, error_code=ErrorCode.none, mechanisms=mechanisms))

    def token(self, token: bytes) -> tuple[bytes | None, str | None]:
        """Feed one client token: (server token, None) or (None, error message safe to send)."""
        session = self._session
        if self.stage is not SaslStage.AUTHENTICATING or session is None:
            self.failure = "Unexpected SASL token: no SASL handshake on this connection"
            return None, self.failure
        try:
            if session.stage is ScramServerStage.CLIENT_FIRST:
                return session.receive_client_first(token), None
            reply = session.receive_client_final(token)
        except (ScramAuthenticationError, ScramStateError) as e:
            self.stage = SaslStage.FAILED
            self.failure = str(e)
            return None, self.failure
        self.user = session.authenticated_user
        self.stage = SaslStage.AUTHENTICATED
        return reply, None

    def authenticate(self, api_version: int, request: Any) -> SaslOutcome:
        cls = response_schema(ApiKey.SASL_AUTHENTICATE, api_version)
        if self.raw_tokens:
            return SaslOutcome(
                build(
                    cls,
                    error_code=ErrorCode.illegal_sasl_state,
                    error_message="SaslAuthenticate after a v0 SaslHandshake",
                    auth_bytes=b"",
                    session_lifetime=timedelta(0),
                ),
                close=True,
            )
        reply, error = self.token(bytes(request.auth_bytes))
        if error is not None:
            code = ErrorCode.sasl_authentication_failed
            if self._session is None:
                code = ErrorCode.illegal_sasl_state
            response = build(cls, error_code=code, error_message=error, auth_bytes=b"", session_lifetime=timedelta(0))
            return SaslOutcome(response, failed=True, close=True)
        response = build(
            cls, error_code=ErrorCode.none, error_message=None, auth_bytes=reply or b"", session_lifetime=timedelta(0)
        )
        return SaslOutcome(response)


def record_login(logins: LoginStatistics, listener: str, host: str, sasl: SaslState, *, succeeded: bool) -> None:
    """Count one finished login on ``listener`` under its mechanism (``none`` without a handshake), and log it:
    a failure at INFO with the client's address, the listener, the mechanism, the claimed user name (quoted and
    shortened: it is client input) and the reason; a success at DEBUG."""
    mechanism = sasl.mechanism or "none"
    logins.record(listener, mechanism, succeeded=succeeded)
    claimed = sasl.claimed_user
    if claimed is not None and len(claimed) > _LOGGED_NAME_CHARS:
        claimed = claimed[:_LOGGED_NAME_CHARS] + "…"
    if succeeded:
        log.debug("Successfully authenticated with /%s (listener %s, mechanism %s, user %r)", host, listener,
                  mechanism, claimed)  # fmt: skip
    else:
        log.info("Failed authentication with /%s (listener %s, mechanism %s, user %r): %s", host, listener,
                 mechanism, claimed, sasl.failure or "authentication failed")  # fmt: skip
