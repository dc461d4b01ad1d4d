"""SASL on a connection: SaslHandshake (17) then the mechanism's tokens, in SaslAuthenticate (36) requests or —
after a v0 handshake — as raw frames (SEMANTICS.md §11.5).

States: HANDSHAKE (nothing yet) → AUTHENTICATING (mechanism chosen) → AUTHENTICATED, or FAILED (the connection
closes after the configured delay). The mechanisms (SCRAM, PLAIN, OAUTHBEARER) live in ``protocol.mechanisms``; this
module only moves tokens and turns outcomes into Kafka responses. A login ends in a ``mechanisms.Login``: who, and
what bounds the session (the stored credential proved, or the token's expiry).

**Session lifetime.** An OAUTHBEARER session lasts until its token expires (or ``connections_max_reauth_ms``, if
sooner), as in Kafka (its ``ReauthInfo`` takes the token's expiry even with ``connections.max.reauth.ms`` at 0): the
client is told in ``session_lifetime_ms`` (0 for a token that expired within the allowed clock skew), and the
first request after it closes the connection unless the client re-authenticated.

**Re-authentication (KIP-368).** With ``connections_max_reauth_ms`` > 0 every login gets a session lifetime of that
many milliseconds (SCRAM credentials do not expire, so it is just the setting), sent to the client in SaslAuthenticate
v1+'s ``session_lifetime_ms``. As in Kafka, a client that logged in with SaslAuthenticate v0 or raw tokens is not told
but its session expires all the same (KAFKA-9241: Kafka closes such connections once their session is over). A
client re-authenticates on the same connection with SaslHandshake v1 + SaslAuthenticate: ``reauthentication()``
starts a fresh state for that, which accepts only the mechanism and the user of the session it renews (Kafka's
rules and messages) and uses Kafka's "re-authentication" wording in its failure message. The clock (when a session
expires) is the connection's business (``protocol.sessions``).

``record_login`` counts a finished login (``Services.logins``) and logs it as Kafka's ``Selector`` does: a failure
at INFO, ``Failed authentication with /<address> (...)``, naming the listener, the mechanism, the user name the
client claimed and the reason sent to the client (never a password, a proof or a key); a success at DEBUG. A login
the failure budget refused unchecked (``SaslState.throttled``) is counted as failed too but logged at DEBUG: the
connection reports it through ``Services.refusals`` instead, one line per address a minute, since a flood of them
would otherwise be a flood of lines.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from enum import Enum, auto
from typing import Any

from kio.schema.errors import ErrorCode

from kafkaguard.audit.records.logins import LoginStatistics
from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.errors import ScramStateError
from kafkaguard.protocol.builders import sasl_authenticate_response, sasl_handshake_response
from kafkaguard.protocol.codec import constant_response, response_schema
from kafkaguard.protocol.mechanisms import Challenge, Failed, Login, MechanismServer, MechanismSource
from kafkaguard.protocol.messages import SaslAuthenticateResponse, SaslHandshakeResponse
from kafkaguard.protocol.repeated_lines import COLLAPSE

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
    """What to send back and what happens next. ``failed``: answer after the failure delay (unless ``delay`` is
    false: the broker's verdict, delayed by the broker), then close."""

    response: Any
    failed: bool = False
    close: bool = False
    delay: bool = True


class SaslState:
    def __init__(
        self,
        enabled: list[str],
        mechanisms: MechanismSource,
        client: str,
        *,
        session_lifetime_ms: int = 0,
        renewing: SaslState | None = None,
        refuse_login: Callable[[str], str | None] | None = None,
        withheld: Mapping[str, str] | None = None,
    ) -> None:
        """``enabled``: the mechanisms this listener offers; ``client``: the client's address. ``session_lifetime_ms``:
        ``connections_max_reauth_ms`` (0: sessions never expire, unless their token does). ``renewing``: the
        authenticated state this one re-authenticates (``reauthentication()``). ``refuse_login``: why a principal
        whose login proved who it is may not log in now, or None (``violations.ProtocolViolations.login_refusal``);
        asked of new logins only, never of a re-authentication. ``withheld``: configured mechanisms this listener
        does not offer, with why (``IdentitySettings.withheld_mechanisms``): logged when a client asks for one."""
        self.stage = SaslStage.HANDSHAKE
        self.raw_tokens = False  # after a v0 handshake, tokens come as raw frames
        #: The finished login, once authenticated.
        self.login: Login | None = None
        #: Why the login failed (the message sent to the client), once it has.
        self.failure: str | None = None
        #: Whether the failure budget refused the login unchecked (``mechanisms.Failed.throttled``).
        self.throttled = False
        #: The failure's Kafka error code when it is not SASL_AUTHENTICATION_FAILED (a broker's, passed through).
        self.failure_code: int | None = None
        #: Whether the failure is the broker's verdict, passed through (``mechanisms.Failed.relayed``).
        self.failure_relayed = False
        #: The error message of the last step that went on or succeeded (None; a broker's passed through).
        self.answer_message: str | None = None
        #: How long the session lasts once authenticated, in ms; 0: until the connection closes.
        self.session_lifetime_ms = session_lifetime_ms
        self._reauth_ms = session_lifetime_ms
        self._enabled = enabled
        self._withheld = withheld or {}
        self._mechanisms = mechanisms
        self._client = client
        self._server: MechanismServer | None = None
        #: The (user, mechanism) a re-authentication must keep; only the names, so that states do not chain.
        self._renewing = None if renewing is None else (renewing.user, renewing.mechanism)
        self._refuse_login = refuse_login

    @property
    def authenticated(self) -> bool:
        return self.stage is SaslStage.AUTHENTICATED

    @property
    def user(self) -> str | None:
        """The authenticated user, or None before the login completed."""
        return None if self.login is None else self.login.user

    @property
    def mechanism(self) -> str | None:
        """The SASL mechanism chosen in the handshake, or None before it."""
        return None if self._server is None else self._server.name

    @property
    def claimed_user(self) -> str | None:
        """The user name the client claimed (authenticated or not), or None before it said one."""
        return None if self._server is None else self._server.claimed_user

    @property
    def reauthenticating(self) -> bool:
        """Whether this state re-authenticates a session (KIP-368) rather than logging a connection in."""
        return self._renewing is not None

    def reauthentication(self) -> SaslState:
        """A fresh state for re-authenticating this authenticated session on the same connection (KIP-368).

        :raises ScramStateError: this state is not authenticated.
        """
        if not self.authenticated:
            raise ScramStateError("SASL: only an authenticated session can re-authenticate")
        return SaslState(
            self._enabled,
            self._mechanisms,
            self._client,
            session_lifetime_ms=self._reauth_ms,
            renewing=self,
            withheld=self._withheld,
        )

    def refuse(self, api_key: ApiKey, api_version: int, message: str) -> SaslOutcome:
        """The answer to a SaslHandshake or SaslAuthenticate that this connection may not send now (a handshake
        after login when re-authentication is off or too soon, a SaslAuthenticate without a handshake):
        ILLEGAL_SASL_STATE (with ``message`` where the API has one), then the connection closes."""
        if api_key is ApiKey.SASL_HANDSHAKE:
            handshake: type[SaslHandshakeResponse] = response_schema(api_key, api_version)
            return SaslOutcome(
                sasl_handshake_response(
                    handshake, error_code=ErrorCode.illegal_sasl_state, mechanisms=tuple(self._enabled)
                ),
                close=True,
            )
        cls: type[SaslAuthenticateResponse] = response_schema(api_key, api_version)
        response = sasl_authenticate_response(
            cls,
            error_code=ErrorCode.illegal_sasl_state,
            error_message=message,
            auth_bytes=b"",
            session_lifetime=timedelta(0),
        )
        return SaslOutcome(response, close=True)

    def handshake(self, api_version: int, request: Any) -> SaslOutcome:
        cls: type[SaslHandshakeResponse] = response_schema(ApiKey.SASL_HANDSHAKE, api_version)
        mechanisms = tuple(self._enabled)
        if self.stage is not SaslStage.HANDSHAKE:
            return SaslOutcome(
                sasl_handshake_response(cls, error_code=ErrorCode.illegal_sasl_state, mechanisms=mechanisms), close=True
            )
        name = str(request.mechanism)
        if name not in self._enabled:
            why = self._withheld.get(name)
            if why is None:
                log.info("SASL handshake for unsupported mechanism %r", _shown(name))
            else:  # the client's only clue is "Unsupported SASL mechanism": the server's log says why
                log.warning("SASL handshake from /%s refused: %s", self._client, why, extra=COLLAPSE)
            return SaslOutcome(
                sasl_handshake_response(cls, error_code=ErrorCode.unsupported_sasl_mechanism, mechanisms=mechanisms),
                close=True,
            )
        renewing = self._renewing
        if renewing is not None:
            refusal = _refuse_renewal(renewing[1], api_version, name)
            if refusal is not None:
                code, self.failure = refusal
                self.stage = SaslStage.FAILED
                return SaslOutcome(
                    sasl_handshake_response(cls, error_code=code, mechanisms=mechanisms), failed=True, close=True
                )
        self._server = self._mechanisms.server(name, client=self._client, reauthentication=renewing is not None)
        self.stage = SaslStage.AUTHENTICATING
        self.raw_tokens = api_version == 0
        return SaslOutcome(accepted_handshake(api_version, mechanisms))

    async def token(self, token: bytes) -> tuple[bytes | None, str | None]:
        """Feed one client token: (server token, None) or (None, error message safe to send)."""
        server = self._server
        if self.stage is not SaslStage.AUTHENTICATING or server is None:
            self.failure = "Unexpected SASL token: no SASL handshake on this connection"
            return None, self.failure
        step = await server.step(token)
        if isinstance(step, Challenge):
            self.answer_message = step.message
            return step.token, None
        if isinstance(step, Failed):
            self.throttled = step.throttled
            self.failure_code, self.failure_relayed = step.error_code, step.relayed
            return self._fail(step.message)
        login, renewing = step.login, self._renewing
        if renewing is not None and login.user != renewing[0]:
            return self._fail(
                f"Cannot change principals during re-authentication from User.{renewing[0]}: User.{login.user}"
            )
        if renewing is None and self._refuse_login is not None:
            # Asked only now that the proof has passed: the refusal tells nobody but this principal that it exists.
            refusal = self._refuse_login(f"User:{login.user}")
            if refusal is not None:
                return self._fail(refusal)
        self.login = login
        self.answer_message = step.message
        relayed = login.relayed_lifetime_ms
        self.session_lifetime_ms = _lifetime_ms(self._reauth_ms, login.expires_at_ms) if relayed is None else relayed
        self.stage = SaslStage.AUTHENTICATED
        return step.token, None

    def _fail(self, message: str) -> tuple[None, str]:
        self.stage = SaslStage.FAILED
        self.failure = message
        return None, message

    async def authenticate(self, api_version: int, request: Any) -> SaslOutcome:
        cls: type[SaslAuthenticateResponse] = response_schema(ApiKey.SASL_AUTHENTICATE, api_version)
        if self.raw_tokens:
            return SaslOutcome(
                sasl_authenticate_response(
                    cls,
                    error_code=ErrorCode.illegal_sasl_state,
                    error_message="SaslAuthenticate after a v0 SaslHandshake",
                    auth_bytes=b"",
                    session_lifetime=timedelta(0),
                ),
                close=True,
            )
        reply, error = await self.token(bytes(request.auth_bytes))
        if error is not None:
            code = ErrorCode.sasl_authentication_failed
            if self._server is None:
                code = ErrorCode.illegal_sasl_state
            elif self.failure_code is not None:
                code = ErrorCode(self.failure_code)
            response = sasl_authenticate_response(
                cls, error_code=code, error_message=error, auth_bytes=b"", session_lifetime=timedelta(0)
            )
            return SaslOutcome(response, failed=True, close=True, delay=not self.failure_relayed)
        # v0 has no session_lifetime_ms: such a client is not told, yet its session expires all the same (Kafka).
        lifetime = self.session_lifetime_ms if self.authenticated and api_version >= 1 else 0
        response = sasl_authenticate_response(
            cls,
            error_code=ErrorCode.none,
            error_message=self.answer_message,
            auth_bytes=reply or b"",
            session_lifetime=timedelta(milliseconds=lifetime),
        )
        return SaslOutcome(response)


def _lifetime_ms(reauth_ms: int, expires_at_ms: int | None) -> int:
    """A session's lifetime as Kafka's ``ReauthInfo`` computes it: ``connections_max_reauth_ms`` (0: none), or what
    its token has left (0 when it has expired within the clock skew), whichever is smaller."""
    if expires_at_ms is None:
        return reauth_ms
    left = max(0, expires_at_ms - int(time.time() * 1000))
    return left if reauth_ms <= 0 else min(reauth_ms, left)


@functools.lru_cache(maxsize=64)
def accepted_handshake(api_version: int, mechanisms: tuple[str, ...]) -> SaslHandshakeResponse:
    """The SaslHandshake answer that accepts a mechanism: the same for every login on a listener, so made and encoded
    once (``codec.constant_response``)."""
    cls: type[SaslHandshakeResponse] = response_schema(ApiKey.SASL_HANDSHAKE, api_version)
    return constant_response(sasl_handshake_response(cls, error_code=ErrorCode.none, mechanisms=mechanisms))


def _refuse_renewal(previous: str | None, api_version: int, mechanism: str) -> tuple[ErrorCode, str] | None:
    """Why a re-authentication's handshake is refused (error code, message), or None: it must be SaslHandshake v1+
    (raw tokens in the middle of a session would be read as requests) and name the session's mechanism
    ``previous`` (Kafka's rule and message)."""
    if api_version == 0:
        return ErrorCode.illegal_sasl_state, "Re-authentication needs SaslHandshake v1 or later"
    if mechanism != previous:
        return ErrorCode.unsupported_sasl_mechanism, (
            f"SASL mechanism '{_shown(mechanism)}' requested by client is not supported for re-authentication of "
            f"mechanism '{previous}'"
        )
    return None


def _shown(text: str) -> str:
    """Client input as a log line shows it: at most ``_LOGGED_NAME_CHARS`` characters."""
    return text if len(text) <= _LOGGED_NAME_CHARS else text[:_LOGGED_NAME_CHARS] + "…"


def record_login(logins: LoginStatistics, listener: str, host: str, sasl: SaslState, *, succeeded: bool) -> None:
    """Count one finished login on ``listener`` under its mechanism (``none`` without a handshake), and log it:
    a failure at INFO with the client's address, the listener, the mechanism, the claimed user name (quoted and
    shortened: it is client input) and the reason; a success at DEBUG."""
    mechanism = sasl.mechanism or "none"
    if not sasl.reauthenticating:  # a re-authentication is no new login (Kafka counts them apart, too)
        logins.record(listener, mechanism, succeeded=succeeded)
    claimed = sasl.claimed_user
    if claimed is not None:
        claimed = _shown(claimed)
    what = "re-authenticated" if sasl.reauthenticating else "authenticated"
    if succeeded:
        log.debug(
            "Successfully %s with /%s (listener %s, mechanism %s, user %r)", what, host, listener, mechanism, claimed
        )
    elif sasl.throttled:  # reported rate-limited by the connection (Services.refusals)
        log.debug(
            "Refused %s with /%s (listener %s, mechanism %s, user %r): %s",
            what,
            host,
            listener,
            mechanism,
            claimed,
            sasl.failure,
        )
    else:
        log.info(
            "Failed %s with /%s (listener %s, mechanism %s, user %r): %s",
            "re-authentication" if sasl.reauthenticating else "authentication",
            host,
            listener,
            mechanism,
            claimed,
            sasl.failure or "authentication failed",
            extra=COLLAPSE,
        )


def record_peer_login(
    logins: LoginStatistics, listener: str, host: str, mechanism: str, outcome: object, *, succeeded: bool
) -> None:
    """Count and log a client identified by its TLS certificate (``mechanism`` SSL): ``outcome`` is its principal,
    or why it has none (a failure, logged at INFO as Kafka's ``Selector`` logs a failed authentication)."""
    logins.record(listener, mechanism, succeeded=succeeded)
    if succeeded:
        log.debug(
            "Successfully authenticated with /%s (listener %s, %s certificate of %s)",
            host,
            listener,
            mechanism,
            outcome,
        )
    else:
        log.info(
            "Failed authentication with /%s (listener %s, %s certificate): %s",
            host,
            listener,
            mechanism,
            outcome,
            extra=COLLAPSE,
        )
