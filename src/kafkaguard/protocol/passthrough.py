"""Logins passed through to the upstream broker (the proxy's ``upstream_authentication: passthrough``).

A mechanism passed through is a ``MechanismServer`` like the others (``protocol.mechanisms``), but it checks nothing
itself: each client token goes to the broker over the client connection's own upstream connection (a ``LoginRelay``:
the proxy's ``UpstreamConnection``), and the broker's answer is the answer — its server tokens, its verdict, its error
code and message, its session lifetime. kafkaguard only reads the user name the client claims, to know the principal
the broker derives (Kafka's ``ScramSaslServer`` and ``PlainSaslServer`` take it as the authorization id):

* SCRAM-SHA-256/512: the ``n=`` name of the client-first message, ``=2C``/``=3D`` unescaped (``scram.messages``); a
  delegation-token login (the ``tokenauth`` extension) is refused, since its principal is the token's owner, which
  only the broker knows;
* PLAIN: the user name of ``authzid NUL user NUL password`` (the password is relayed, never kept);
* OAUTHBEARER (``OAuthBearerPassthroughServer``): Kafka's ``OAuthBearerSaslServer`` makes the principal the token's
  sub claim (``sasl.oauthbearer.sub.claim.name``, which the proxy checks at start to be kafkaguard's
  ``sasl_oauthbearer_sub_claim_name``). Only once the broker has ACCEPTED the token does kafkaguard read that claim
  (and the groups claim, when ``sasl_oauthbearer_groups_claim_name`` is set) from the JWT's payload, without
  checking its signature — the broker did — after bounding its size (``identity.oauth.accepted_token_claims``); a
  token the broker accepted but kafkaguard cannot read fails the login (closed, never a guessed name). The
  broker's answers are Kafka's OAUTHBEARER exchange: an empty one accepts; a bad token gets its error challenge
  (``{"status":"invalid_token"}``, error code 0), the client's ``%x01`` to it is relayed too, and the broker's
  refusal of that is the login's. The token lives only in the step that relays it: never kept, never logged.

Nothing a client sends is stored or logged here. The process's failed-login budget (``identity.failure_budget``) still
stands in front: asked (``check``) before each token goes up, so a spent address or user name is refused without the
broker being asked, and spent (``refused``) by every step the broker refuses (SCRAM: client-first for an unknown
user, client-final for a wrong proof; PLAIN: its one token). Nothing is taken while the broker's answer is awaited:
held tokens made 200 right PLAIN logins of one address at once fail 83 times with "Too many failed logins" (the
burst spent by logins merely in flight). A success makes (user, address) a known pair (``remember``; PLAIN's keyed by
an HMAC of its password). A broker that cannot be asked raises ``LoginUnavailable``: nothing is spent, the connection
closes without an answer, which Kafka's clients treat as a broker failure and retry, never as "authentication failed".

Cost model: one upstream round trip per client token (a SCRAM login: handshake + two, PLAIN and a good OAUTHBEARER
token: handshake + one, a bad token: handshake + two); the only parsing is a split of the first token (OAUTHBEARER:
the initial response's regular expression and one base64 + JSON decode of a payload of at most 64 KiB, after the
broker accepted it).
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass
from typing import Protocol

from kafkaguard.errors import KafkaguardError, OAuthBearerError, ScramError
from kafkaguard.identity.failure_budget import LoginFailureBudget, LoginThrottledError
from kafkaguard.identity.oauth import TokenExpectations, accepted_token_claims
from kafkaguard.identity.oauthbearer import parse_client_initial_response
from kafkaguard.protocol.mechanisms import (
    Authenticated,
    Challenge,
    Failed,
    Login,
    MechanismServer,
    MechanismSource,
    Step,
    throttled,
)
from kafkaguard.scram.messages import parse_client_first

#: The key of the HMAC of a PLAIN password the failure budget's known pairs compare: one per process, like the
#: budget, since ``PassthroughMechanisms`` is made per connection (a key of each connection's own made every PLAIN
#: password new at its next connection, so no PLAIN user was ever a known pair).
_PLAIN_KEY = secrets.token_bytes(32)

#: The mechanisms a login can pass through (GSSAPI cannot: a ticket is bound to the service it was issued for).
PASSTHROUGH_MECHANISMS = frozenset({"SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN", "OAUTHBEARER"})
#: The client's answer to an OAUTHBEARER error challenge (RFC 7628 §3.2.3).
OAUTHBEARER_ACKNOWLEDGEMENT = b"\x01"


class LoginUnavailable(KafkaguardError):
    """The broker could not be asked (unreachable, closed, or no answer in time); the message never holds a token."""


@dataclass(frozen=True, slots=True)
class RelayedAnswer:
    """The broker's answer to one relayed token (its SaslAuthenticate response, or a refused SaslHandshake's code)."""

    error_code: int
    error_message: str | None
    auth_bytes: bytes
    session_lifetime_ms: int = 0


class LoginRelay(Protocol):
    """Where a passed-through login goes: the client connection's own upstream connection."""

    async def relay_login(self, mechanism: str, token: bytes, *, first: bool) -> RelayedAnswer:
        """Send ``token`` to the broker (``first``: after a SaslHandshake for ``mechanism``) and return its answer.

        :raises LoginUnavailable: the broker could not be asked.
        """
        ...


def claimed_user(mechanism: str, token: bytes) -> tuple[str | None, str | None]:
    """(the user name the first token claims, why it cannot pass through) — both None when the token is malformed:
    the broker then refuses it in its own words."""
    if mechanism == "PLAIN":
        parts = token.decode("utf-8", "replace").split("\x00", 3)  # as Kafka's PlainSaslServer reads it
        return (parts[1] or None, None) if len(parts) == 3 else (None, None)
    if any(part.lower() == "tokenauth=true" for part in token.decode("utf-8", "replace").split(",")):
        # Kafka's principal is then the token's owner, which only the broker knows (and the parser refuses these)
        return None, "Authentication failed: delegation token logins cannot be passed through"
    try:
        return parse_client_first(token).username, None
    except ScramError:
        return None, None


def plain_secret(key: bytes, token: bytes) -> bytes:
    """An HMAC of the password in a PLAIN token (empty for a malformed one), as ``passwords.checker`` keys it."""
    parts = token.split(b"\x00", 2)
    return hmac.digest(key, parts[2], "sha256") if len(parts) == 3 else b""


class PassthroughServer:
    """One client's exchange passed through to the broker (see the module docstring)."""

    def __init__(
        self, name: str, relay: LoginRelay, budget: LoginFailureBudget, client: str, *, key: bytes = b""
    ) -> None:
        """``key``: the process's key for the HMAC of a PLAIN password that the budget's known pairs compare
        (``identity.failure_budget``: only the right password is exempt from a spent address budget)."""
        self.name = name
        self._relay = relay
        self._budget = budget
        self._client = client
        self._key = key
        self._user: str | None = None
        self._secret = b""
        self._steps = 0

    @property
    def claimed_user(self) -> str | None:
        return self._user

    async def step(self, token: bytes) -> Step:
        first = self._steps == 0
        self._steps += 1
        if first:
            self._user, refusal = claimed_user(self.name, token)
            if refusal is not None:
                return Failed(refusal)
            if self.name == "PLAIN":
                self._secret = plain_secret(self._key, token)
        try:  # asked, never held: a SCRAM client-first refused here gets no salt from the broker either
            self._budget.check(self.name, self._client, self._user, secret=self._secret)
        except LoginThrottledError as e:
            return throttled(e)
        answer = await self._relay.relay_login(self.name, token, first=first)  # LoginUnavailable: nothing spent
        if answer.error_code != 0:
            self._budget.refused(self._client, self._user, secret=self._secret)
            return Failed(answer.error_message or "", error_code=answer.error_code, relayed=True)
        if self.name != "PLAIN" and first:
            return Challenge(answer.auth_bytes, answer.error_message)
        self._budget.remember(self._client, self._user, secret=self._secret)
        if self._user is None:  # accepted by the broker, yet no name kafkaguard can read: it cannot authorize it
            return Failed("Authentication failed: the user name could not be read for authorization")
        login = Login(self._user, self.name, relayed_lifetime_ms=answer.session_lifetime_ms)
        return Authenticated(answer.auth_bytes, login, answer.error_message)


class OAuthBearerPassthroughServer:
    """One client's OAUTHBEARER exchange passed through to the broker (see the module docstring).

    The failure budget counts per address only, as kafkaguard's own OAUTHBEARER does (a token is not guessed name by
    name): asked before an initial response goes up, spent when the broker answers with its error challenge or
    refuses; nothing is held while the broker answers (as the other mechanisms passed through)."""

    name = "OAUTHBEARER"

    def __init__(
        self, relay: LoginRelay, budget: LoginFailureBudget, client: str, expectations: TokenExpectations
    ) -> None:
        self._relay = relay
        self._budget = budget
        self._client = client
        self._expectations = expectations
        self._principal: str | None = None
        self._steps = 0

    @property
    def claimed_user(self) -> str | None:
        """The broker's principal once it accepted the token (before: None, the token is not read unverified)."""
        return self._principal

    async def step(self, token: bytes) -> Step:
        first = self._steps == 0
        self._steps += 1
        acknowledgement = token == OAUTHBEARER_ACKNOWLEDGEMENT and not first
        if not acknowledgement:
            try:  # asked, never held
                self._budget.check(self.name, self._client)
            except LoginThrottledError as e:
                return throttled(e)
        answer = await self._relay.relay_login(self.name, token, first=first)  # LoginUnavailable: nothing spent
        if answer.error_code != 0:
            if not acknowledgement:  # the error challenge before it was this login's failure already
                self._budget.refused(self._client)
            return Failed(answer.error_message or "", error_code=answer.error_code, relayed=True)
        if acknowledgement:  # Kafka refuses the %x01 after its error challenge: no broker accepts it
            return Failed("Authentication failed: the broker accepted an OAUTHBEARER error acknowledgement")
        if answer.auth_bytes:
            # Kafka's error challenge for a token its validator refused: the client answers %x01 (relayed next)
            self._budget.refused(self._client)
            return Challenge(answer.auth_bytes, answer.error_message)
        try:
            response = parse_client_initial_response(token)
            principal, groups = accepted_token_claims(response.token.value, self._expectations)
        except OAuthBearerError as e:  # accepted by the broker, yet not readable as Kafka reads it: fail closed
            return Failed(f"Authentication failed: the accepted token's principal could not be read ({e})")
        self._principal = principal
        login = Login(
            principal,
            self.name,
            groups=tuple(f"Group:{group}" for group in groups),
            relayed_lifetime_ms=answer.session_lifetime_ms,
        )
        return Authenticated(answer.auth_bytes, login, answer.error_message)


class PassthroughMechanisms:
    """A listener's mechanisms with ``passed`` ones passed through ``relay``; the rest are kafkaguard's own.
    ``expectations``: the claims an OAUTHBEARER token accepted by the broker is read with (``sub_claim_name``,
    ``groups_claim``; the rest is the broker's business)."""

    def __init__(
        self,
        own: MechanismSource,
        relay: LoginRelay,
        passed: frozenset[str],
        budget: LoginFailureBudget,
        expectations: TokenExpectations | None = None,
    ) -> None:
        self._own = own
        self._relay = relay
        self._passed = passed & PASSTHROUGH_MECHANISMS
        self._budget = budget
        self._expectations = expectations or TokenExpectations()
        self._key = _PLAIN_KEY

    def passes(self, name: str) -> bool:
        return name in self._passed

    def server(self, name: str, *, client: str, reauthentication: bool) -> MechanismServer:
        if name == OAuthBearerPassthroughServer.name and name in self._passed:
            return OAuthBearerPassthroughServer(self._relay, self._budget, client, self._expectations)
        if name in self._passed:
            return PassthroughServer(name, self._relay, self._budget, client, key=self._key)
        return self._own.server(name, client=client, reauthentication=reauthentication)
