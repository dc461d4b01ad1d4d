"""The SASL mechanisms a Kafka listener offers, each a server that takes the client's tokens one at a time and ends
in a ``Login`` or a failure whose message is safe to send to the client.

::

    server = mechanisms.server("PLAIN", client="10.0.0.7", reauthentication=False)
    await server.step(b"\\x00alice\\x00alice-secret")   # Authenticated(token=b"", login=Login("alice", ...))
    await server.step(b"\\x00alice\\x00wrong")          # Failed("Authentication failed: Invalid username or ...")

- **SCRAM-SHA-256/512** (``kafkaguard.scram.server``): two tokens; the credential proved must still be the stored one
  when the proof arrives. The proof is checked cheaply on the loop, but each check is a guess: the failure budget
  is asked at client-first (a refused client gets no salt) and pays at client-final, before the proof is compared.
- **PLAIN** (Kafka's ``PlainSaslServer``: its token format, checks and messages): one token, the password checked
  against the stored SCRAM credential by ``passwords.checker`` — PBKDF2 on a bounded pool off the event loop, the
  failure budget per address and per user name, recent successes cached. Kafka reads PLAIN users from JAAS;
  kafkaguard has one user store (a deliberate difference, SEMANTICS.md §16).
- **OAUTHBEARER** (Kafka's ``OAuthBearerSaslServer`` with ``OAuthBearerValidatorCallbackHandler``): the token
  validated against the identity provider's keys (``identity.oauth``); a bad token gets Kafka's error challenge,
  and the client's ``%x01`` answer to it fails the login. A token's check pays with a failed login of the client's
  address before its key is looked up, so an address whose budget is spent cannot make the JWKS refresh.
- **GSSAPI** (Kerberos V5, RFC 4752, as Kafka's broker runs Java's ``GssKrb5Server``): the client's ticket accepted
  with the node's own keytab (``identity.kerberos``), the Kerberos principal it proves mapped to the ``User:`` name by
  ``sasl_kerberos_principal_to_local_rules`` (``identity.kerberos_names``). Accepting a ticket reads the keytab and
  writes the replay cache, so it runs on a bounded pool of its own (``KerberosCheck``); a spent address is refused
  before it, and a refused ticket spends a failed login of the address. A principal the rules cannot map fails the
  login (Kafka fails that connection at its first request instead).

Every mechanism draws on the process's one ``LoginFailureBudget`` (``identity.failure_budget``): a refused login
fails with "Authentication failed: Too many failed logins …; retry after N s" (``Failed.throttled``), whether or not
the user exists.

A ``Login`` says who logged in and what bounds the session: the stored credential it proved (SCRAM, PLAIN: the
session ends when that credential is deleted or changed) or the token's expiry (OAUTHBEARER: the session ends then),
and the groups the token carried.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Protocol

from kafkaguard.errors import (
    OAuthBearerAuthenticationError,
    OAuthBearerError,
    ScramAuthenticationError,
    ScramStateError,
)
from kafkaguard.identity.failure_budget import LoginFailureBudget, LoginThrottledError
from kafkaguard.identity.jwks import JwksSource
from kafkaguard.identity.kerberos import Acceptor, GssapiServerExchange, KerberosError
from kafkaguard.identity.kerberos_names import KerberosMappingError, KerberosName, KerberosShortNamer
from kafkaguard.identity.oauth import (
    KeySet,
    TokenExpectations,
    TokenRejected,
    ValidatedToken,
    token_key_id,
    validate_token,
)
from kafkaguard.identity.oauthbearer import OAuthBearerServerSession, OAuthBearerServerStage
from kafkaguard.passwords.checker import PasswordChecker
from kafkaguard.passwords.throttle import DerivationPool
from kafkaguard.protocol.repeated_lines import COLLAPSE
from kafkaguard.scram import ScramCredential, ScramMechanism
from kafkaguard.scram.server import ScramServerSession, ScramServerStage, authentication_failed_message
from kafkaguard.service.credentials import CredentialService

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Login:
    """A finished login: the user (the principal is ``User:<user>``) and what bounds its session."""

    user: str
    mechanism: str
    #: SCRAM and PLAIN: the stored credential the client proved (its repr masks every secret).
    credential: ScramCredential | None = None
    #: OAUTHBEARER: when the token expires, in ms since the epoch.
    expires_at_ms: int | None = None
    #: OAUTHBEARER with a groups claim: the token's groups, as ``Group:NAME`` principals.
    groups: tuple[str, ...] = field(default=())
    #: A login passed through to the broker (``protocol.passthrough``): the session lifetime the broker gave, in ms
    #: (0: none), which is then the session's, whatever kafkaguard's ``connections_max_reauth_ms``.
    relayed_lifetime_ms: int | None = None


@dataclass(frozen=True, slots=True)
class Challenge:
    """The exchange goes on: send ``token`` and wait for the client's next one."""

    token: bytes
    #: The error message to answer with (a broker's, passed through: Kafka sends "" where kafkaguard sends null).
    message: str | None = None


@dataclass(frozen=True, slots=True)
class Authenticated:
    """The login succeeded: send ``token`` (the mechanism's last server message, maybe empty)."""

    token: bytes
    login: Login
    #: As ``Challenge.message``.
    message: str | None = None


@dataclass(frozen=True, slots=True)
class Failed:
    """The login failed; ``message`` is safe to send to the client. ``throttled``: refused unchecked by the failure
    budget (or a full derivation pool)."""

    message: str
    throttled: bool = False
    #: The Kafka error code to answer (None: SASL_AUTHENTICATION_FAILED).
    error_code: int | None = None
    #: The broker's verdict, passed through (``protocol.passthrough``): answered as it came, without kafkaguard's own
    #: failure delay (the broker delayed it already).
    relayed: bool = False


def throttled(error: LoginThrottledError) -> Failed:
    """The failure a login refused by the budget ends in (Kafka's "Authentication failed: " prefix)."""
    return Failed(f"Authentication failed: {error}", throttled=True)


Step = Challenge | Authenticated | Failed


class MechanismServer(Protocol):
    """One client's exchange for one mechanism."""

    @property
    def name(self) -> str:
        """The mechanism's SASL name (``SCRAM-SHA-256``)."""

    @property
    def claimed_user(self) -> str | None:
        """The user name the client claimed so far (for the log; None before it said one)."""

    async def step(self, token: bytes) -> Step:
        """Take the client's next token."""


class MechanismSource(Protocol):
    """What a SASL handshake starts its exchange from: ``Mechanisms``, or ``passthrough.PassthroughMechanisms``."""

    def server(self, name: str, *, client: str, reauthentication: bool) -> MechanismServer:
        """A server for one exchange of the enabled mechanism ``name`` with the client at address ``client``."""
        ...


class ScramServer:
    """SCRAM-SHA-256/512: ``kafkaguard.scram.server``'s state machine, the failure budget around the proof, and the
    stored-credential check at the end."""

    def __init__(
        self,
        mechanism: ScramMechanism,
        credentials: CredentialService,
        secret: bytes,
        budget: LoginFailureBudget,
        client: str,
        *,
        reauthentication: bool,
    ) -> None:
        self._credentials = credentials
        self._budget = budget
        self._client = client
        self._reauthentication = reauthentication
        self._session = ScramServerSession(
            mechanism,
            credentials.lookup_for(mechanism),
            decoy_secret=secret,
            decoy_profile=credentials.decoy_profile(mechanism),
            reauthentication=reauthentication,
        )

    @property
    def name(self) -> str:
        return self._session.mechanism.mechanism_name

    @property
    def claimed_user(self) -> str | None:
        return self._session.username

    async def step(self, token: bytes) -> Step:
        session = self._session
        name = self.name
        try:
            if session.stage is ScramServerStage.CLIENT_FIRST:
                server_first = session.receive_client_first(token)
                # A refused client gets no salt: the same answer for every name, known or not.
                self._budget.check(name, self._client, session.username)
                return Challenge(server_first)
            attempt = self._budget.take(name, self._client, session.username)  # before the proof is compared
        except LoginThrottledError as e:
            return throttled(e)
        except (ScramAuthenticationError, ScramStateError) as e:
            return Failed(str(e))
        try:
            reply = session.receive_client_final(token)
        except (ScramAuthenticationError, ScramStateError) as e:
            self._budget.failed(attempt)
            return Failed(str(e))
        user, mechanism, credential = session.authenticated_user, session.mechanism, session.authenticated_credential
        if not self._credentials.is_current(user, mechanism, credential):
            # Deleted or replaced since client-first: the client proved a credential that no longer exists. Said
            # as a wrong password is, so the answer tells nothing about when the password changed.
            self._budget.failed(attempt)
            return Failed(authentication_failed_message(mechanism, reauthentication=self._reauthentication))
        self._budget.succeeded(attempt)
        return Authenticated(reply, Login(user, name, credential=credential))


#: Kafka's PlainSaslServer messages.
_PLAIN_NO_USER = "Authentication failed: username not specified"
_PLAIN_NO_PASSWORD = "Authentication failed: password not specified"  # noqa: S105 - a message, not a password
_PLAIN_WRONG = "Authentication failed: Invalid username or password"
_PLAIN_OTHER_AUTHZID = "Authentication failed: Client requested an authorization id that is different from username"


class PlainServer:
    """SASL/PLAIN (RFC 4616) as Kafka's ``PlainSaslServer`` reads it, the password checked against the stored
    SCRAM credential (``passwords.checker``)."""

    name = "PLAIN"

    def __init__(self, checker: PasswordChecker, client: str) -> None:
        self._checker = checker
        self._client = client
        self._user: str | None = None

    @property
    def claimed_user(self) -> str | None:
        return self._user

    async def step(self, token: bytes) -> Step:
        if self._user is not None:
            return Failed("Unexpected SASL/PLAIN token: PLAIN takes one")
        # Kafka decodes the whole token as UTF-8 (malformed bytes become U+FFFD) and splits it at most 3 times.
        parts = token.decode("utf-8", "replace").split("\x00", 3)
        if len(parts) != 3:
            return Failed(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
        authorization_id, user, password = parts
        self._user = user
        if not user:
            return Failed(_PLAIN_NO_USER)
        if not password:
            return Failed(_PLAIN_NO_PASSWORD)
        try:
            credential = await self._checker.verify(user, password, self._client)
        except LoginThrottledError as e:  # no failed login left for this address or name, or too many checks
            return throttled(e)
        if credential is None:
            return Failed(_PLAIN_WRONG)
        if authorization_id and authorization_id != user:
            return Failed(_PLAIN_OTHER_AUTHZID)
        return Authenticated(b"", Login(user, self.name, credential=credential))


#: Valid tokens remembered (``TokenCheck``): a client logs in with the same token on every connection until it
#: refreshes it, so a fleet's tokens number about its clients.
MAX_REMEMBERED_TOKENS = 10_000


@dataclass(frozen=True, slots=True)
class TokenCheck:
    """What OAUTHBEARER tokens are checked against: the identity provider's keys and Kafka's expectations.

    A token found valid is remembered (by its SHA-256, never the token itself) with the key set it was checked
    against, and is valid again without a second signature check while that key set is the current one and the token
    has not expired: every check of ``validate_token`` gives the same answer then (its time rules only ever turn
    a valid token invalid at ``exp``, and a token past ``exp`` is checked in full again, skew included). A JWKS
    refresh makes a new key set, so a removed key stops its tokens at once, as in Kafka. Why: verifying RS256 and
    reading the claims was a large share of an OAUTHBEARER login's server time (``bench_logins``; see
    docs/benchmarks.md, "Figures from the code"), and clients reuse a token on all their connections."""

    keys: JwksSource
    expectations: TokenExpectations
    _valid: OrderedDict[bytes, tuple[KeySet, ValidatedToken]] = field(default_factory=OrderedDict, repr=False)

    async def validate(self, token: str) -> ValidatedToken:
        """:raises TokenRejected: the token is not valid (the reason is for the log; it never holds the token)."""
        now_ms = int(time.time() * 1000)
        digest = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
        remembered = self._valid.get(digest)
        if remembered is not None:
            keys, validated = remembered
            if keys is self.keys.keys and now_ms < validated.expires_at_ms:
                self._valid.move_to_end(digest)
                return validated
            del self._valid[digest]
        try:
            keys = await self.keys.keys_for(token_key_id(token))
        except TokenRejected:
            raise
        except OAuthBearerError as e:  # a malformed header: no key id to look up
            raise TokenRejected(str(e)) from None
        validated = validate_token(token, keys, self.expectations, now_ms)
        if keys is self.keys.keys:  # not remembered against keys a refresh has replaced meanwhile
            self._valid[digest] = (keys, validated)
            if len(self._valid) > MAX_REMEMBERED_TOKENS:
                self._valid.popitem(last=False)
        return validated


class OAuthBearerServer:
    """SASL/OAUTHBEARER: ``identity.oauthbearer``'s state machine, the token checked by ``TokenCheck`` (Kafka's
    ``OAuthBearerValidatorCallbackHandler``). A bad token gets Kafka's ``{"status":"invalid_token"}`` challenge; the
    client's ``%x01`` answer to it fails the login with that message."""

    name = "OAUTHBEARER"

    def __init__(self, check: TokenCheck, budget: LoginFailureBudget, client: str) -> None:
        self._check = check
        self._budget = budget
        self._client = client
        self._session = OAuthBearerServerSession()
        self._principal: str | None = None

    @property
    def claimed_user(self) -> str | None:
        return self._principal

    async def step(self, token: bytes) -> Step:
        session = self._session
        try:
            response = session.receive_client_response(token)
            outcome: ValidatedToken | TokenRejected
            # Per address only: a token is not guessed name by name. Before the key lookup, so that an address
            # whose budget is spent cannot make the JWKS refresh at all.
            attempt = self._budget.take(self.name, self._client)
            try:
                outcome = await self._check.validate(response.token.value)
            except TokenRejected as e:
                log.info("OAUTHBEARER token from /%s refused: %s", self._client, e, extra=COLLAPSE)  # never the token
                self._budget.failed(attempt)
                outcome = e
            else:
                self._budget.succeeded(attempt)
                self._principal = outcome.principal_name
            challenge = session.receive_validation(outcome)
        except LoginThrottledError as e:
            return throttled(e)
        except OAuthBearerAuthenticationError as e:
            return Failed(e.client_message)
        except OAuthBearerError as e:  # a step out of order: no Kafka client does this
            return Failed(str(e))
        if session.stage is not OAuthBearerServerStage.AUTHENTICATED:
            return Challenge(challenge)
        validated = session.validated_token
        groups = tuple(f"Group:{group}" for group in validated.groups)
        login = Login(validated.principal_name, self.name, expires_at_ms=validated.expires_at_ms, groups=groups)
        return Authenticated(challenge, login)


@dataclass(frozen=True, slots=True)
class KerberosCheck:
    """What GSSAPI logins are checked with: the node's acceptor (keytab and service principal), the rules that name
    a principal, and the pool tickets are accepted on (``sasl_kerberos_accept_workers``,
    ``sasl_kerberos_accept_max_pending``)."""

    acceptor: Acceptor
    namer: KerberosShortNamer
    pool: DerivationPool


#: Kafka's message for a GSSAPI login that failed (SaslServerAuthenticator's, with the SASL server's reason).
_GSSAPI_FAILED = "Authentication failed during authentication due to invalid credentials with SASL mechanism GSSAPI"


class GssapiServer:
    """SASL/GSSAPI: ``identity.kerberos``'s server exchange, the ticket accepted on the ``KerberosCheck``'s pool (the
    later steps wrap and unwrap a few bytes: on the loop), the principal named by its rules.

    The failure budget (per address: a ticket is not guessed name by name) is asked before the ticket is accepted,
    and a refused ticket spends a failed login; unlike PLAIN's, a GSSAPI check takes nothing while it waits for the
    pool. Why: a ticket cannot be guessed, only forged with the service's key, so the budget bounds the work a
    failing address causes rather than guesses; and 50 clients behind one address logging in at once would
    otherwise spend the address's whole burst merely by waiting (``bench_logins`` saw it). A flood of bad tickets
    can go past the budget by at most the pool's ``max_pending`` in flight."""

    name = "GSSAPI"

    def __init__(self, check: KerberosCheck, budget: LoginFailureBudget, client: str) -> None:
        self._check = check
        self._budget = budget
        self._client = client
        self._exchange: GssapiServerExchange | None = None
        self._peer: str | None = None

    @property
    def claimed_user(self) -> str | None:
        return self._peer

    async def step(self, token: bytes) -> Step:
        exchange = self._exchange
        try:
            if exchange is None:
                self._budget.check(self.name, self._client)  # a spent address is refused before any work
                exchange = self._exchange = self._check.acceptor.exchange()
                reply, done = await self._check.pool.run(exchange.step, token)
            else:
                reply, done = exchange.step(token)
        except LoginThrottledError as e:  # the budget refused, or the pool is full
            return throttled(e)
        except KerberosError as e:
            # GSSAPI's status, never a key
            log.info("GSSAPI login from /%s refused: %s", self._client, e, extra=COLLAPSE)
            # spends what is left (spent meanwhile: none), and counts no refusal the client never got
            self._budget.refused(self._client)
            return Failed(_GSSAPI_FAILED)  # as Kafka: the reason is logged, never sent
        self._peer = exchange.peer
        if not done:
            return Challenge(reply)
        peer = exchange.peer or ""
        try:
            user = self._check.namer.short_name(KerberosName.parse(peer))
        except KerberosMappingError as e:
            log.info("GSSAPI login of %s from /%s has no principal: %s", peer, self._client, e)
            return Failed(
                f"Authentication failed: no principal for {peer} under sasl_kerberos_principal_to_local_rules"
            )
        return Authenticated(reply, Login(user, self.name))


class Mechanisms:
    """What a listener's SASL handshake can start: a ``MechanismServer`` per mechanism name (one per process)."""

    def __init__(
        self,
        credentials: CredentialService,
        secret: bytes,
        budget: LoginFailureBudget,
        passwords: PasswordChecker | None = None,
        tokens: TokenCheck | None = None,
        kerberos: KerberosCheck | None = None,
    ) -> None:
        """``budget``: the process's failed-login budget (``Services.login_budget``); ``passwords``: what checks
        PLAIN's passwords (drawing on the same budget); ``tokens``: OAUTHBEARER's (None: not enabled);
        ``kerberos``: GSSAPI's (None: not enabled)."""
        self._credentials = credentials
        self._secret = secret
        self._budget = budget
        self._passwords = passwords
        self._tokens = tokens
        self._kerberos = kerberos

    def server(self, name: str, *, client: str, reauthentication: bool) -> MechanismServer:
        """A server for one exchange of the enabled mechanism ``name`` with the client at address ``client``.

        :raises ValueError: ``name`` is not a mechanism this process was built for (a handshake checks it first).
        """
        if name == PlainServer.name and self._passwords is not None:
            return PlainServer(self._passwords, client)
        if name == OAuthBearerServer.name and self._tokens is not None:
            return OAuthBearerServer(self._tokens, self._budget, client)
        if name == GssapiServer.name and self._kerberos is not None:
            return GssapiServer(self._kerberos, self._budget, client)
        mechanism = ScramMechanism.from_name(name)
        return ScramServer(
            mechanism, self._credentials, self._secret, self._budget, client, reauthentication=reauthentication
        )
