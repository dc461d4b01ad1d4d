"""The server side of one SASL/SCRAM exchange (RFC 5802 §5, Kafka's ``ScramSaslServer``): an I/O-free state machine.

::

    session = ScramServerSession(
        ScramMechanism.SCRAM_SHA_256,
        credentials.lookup_for(ScramMechanism.SCRAM_SHA_256),
        decoy_secret=server_secret,
        decoy_profile=credentials.decoy_profile(ScramMechanism.SCRAM_SHA_256),
    )
    server_first = session.receive_client_first(client_first)   # stage CLIENT_FIRST -> CLIENT_FINAL
    server_final = session.receive_client_final(client_final)   # stage CLIENT_FINAL -> AUTHENTICATED
    principal = f"User:{session.authenticated_user}"

Any failure moves the session to FAILED and raises a :class:`~kafkaguard.errors.ScramAuthenticationError` whose
message is safe to send to the client (Kafka sends it in the SaslAuthenticate response, SEMANTICS.md §11.5).

**No user enumeration.** An unknown user, a credential of another mechanism and a stored credential with too few
iterations all get a *decoy* credential (``kafkaguard.scram.decoy``): salt, StoredKey and ServerKey derived by
HMAC from the server's ``decoy_secret`` and the user name, iteration count and salt length from ``decoy_profile``
(the shape most stored credentials of the mechanism have). The server-first message is therefore well-formed,
shaped like a real user's, and the same every time for the same name (as a real user's is), and the exchange
fails only at the proof, through the same code path and with the same message as a wrong password. The decoy flag
is checked *after* the proof comparison, so even a client that guessed a decoy key could not authenticate.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

from kafkaguard.errors import InvalidConfigError, ScramAuthenticationError, ScramProtocolError, ScramStateError
from kafkaguard.scram.credential import ScramCredential
from kafkaguard.scram.decoy import DEFAULT_DECOY_PROFILE, DecoyProfile, decoy_credential
from kafkaguard.scram.mechanism import ScramMechanism
from kafkaguard.scram.messages import (
    ClientFirstMessage,
    ServerFinalMessage,
    ServerFirstMessage,
    format_server_final,
    format_server_first,
    is_valid_nonce,
    parse_client_final,
    parse_client_first,
)

#: Kafka's message for a client-first ``a=`` that is not the user name (``ScramSaslServer``).
AUTHORIZATION_ID_MISMATCH_MESSAGE = (
    "Authentication failed: Client requested an authorization id that is different from username"
)

#: Shortest ``decoy_secret`` accepted, in bytes.
MIN_DECOY_SECRET_BYTES = 16

#: ``lookup(username)``: the stored credential of this session's mechanism for that user, or None.
CredentialLookup = Callable[[str], ScramCredential | None]
#: Returns a fresh server nonce: non-empty printable ASCII without ",".
NonceFactory = Callable[[], str]


def authentication_failed_message(mechanism: ScramMechanism, *, reauthentication: bool = False) -> str:
    """Kafka's deliberately generic failure message (``SaslServerAuthenticator``), the same for every cause."""
    during = "re-authentication" if reauthentication else "authentication"
    return f"Authentication failed during {during} due to invalid credentials with SASL mechanism {mechanism}"


def default_nonce() -> str:
    """32 URL-safe base64 characters (192 random bits); Kafka uses a random base-36 string."""
    return secrets.token_urlsafe(24)


class ScramServerStage(Enum):
    """Where a :class:`ScramServerSession` is; the value names the method expected next."""

    CLIENT_FIRST = "receive_client_first"
    CLIENT_FINAL = "receive_client_final"
    AUTHENTICATED = "authenticated_user"
    FAILED = "nothing (the exchange failed; start a new session)"


class ScramServerSession:
    """One SCRAM exchange, server side. Not thread-safe; one session per connection and authentication.

    :param mechanism: the SASL mechanism the client chose in SaslHandshake.
    :param lookup: ``lookup(username) -> ScramCredential | None`` for that mechanism; may raise (a store error
        propagates unchanged and fails the session).
    :param decoy_secret: server-wide secret (at least 16 random bytes) from which unknown users' decoy salts and
        keys are derived; keep it stable across restarts so a decoy salt does not change when a real one would not.
    :param nonce_factory: the server nonce; injected so tests replay RFC 7677 byte for byte.
    :param decoy_profile: iteration count and salt length announced for unknown users: the shape most stored
        credentials of ``mechanism`` have (``CredentialService.decoy_profile``).
    :param reauthentication: use Kafka's "re-authentication" wording in the failure message (KIP-368).
    :raises InvalidConfigError: ``decoy_secret`` too short or the profile's iterations outside the mechanism's
        bounds.
    """

    __slots__ = (
        "_authenticated_credential",
        "_client_first",
        "_decoy_profile",
        "_decoy_secret",
        "_exchange",
        "_failure_message",
        "_lookup",
        "_mechanism",
        "_nonce_factory",
        "_stage",
    )

    def __init__(
        self,
        mechanism: ScramMechanism,
        lookup: CredentialLookup,
        *,
        decoy_secret: bytes,
        nonce_factory: NonceFactory = default_nonce,
        decoy_profile: DecoyProfile = DEFAULT_DECOY_PROFILE,
        reauthentication: bool = False,
    ) -> None:
        if len(decoy_secret) < MIN_DECOY_SECRET_BYTES:
            raise InvalidConfigError(
                f"The SCRAM decoy secret must be at least {MIN_DECOY_SECRET_BYTES} random bytes; "
                f"got {len(decoy_secret)}"
            )
        if not mechanism.min_iterations <= decoy_profile.iterations <= mechanism.max_iterations:
            raise InvalidConfigError(
                f"The decoy's iterations must be between {mechanism.min_iterations} and {mechanism.max_iterations}; "
                f"got {decoy_profile.iterations}"
            )
        self._mechanism = mechanism
        self._lookup = lookup
        self._decoy_secret = decoy_secret
        self._nonce_factory = nonce_factory
        self._decoy_profile = decoy_profile
        self._failure_message = authentication_failed_message(mechanism, reauthentication=reauthentication)
        self._stage = ScramServerStage.CLIENT_FIRST
        #: Kept after the exchange, for ``username`` and ``authenticated_user``; holds nothing secret.
        self._client_first: ClientFirstMessage | None = None
        #: Only while waiting for client-final: it holds the credential's keys.
        self._exchange: _Exchange | None = None
        #: The stored credential the proof was checked against, once it matched (never a decoy): the same object
        #: the credential snapshot holds, kept so its owner can tell when it stops being the stored one.
        self._authenticated_credential: ScramCredential | None = None

    def __repr__(self) -> str:
        username = None if self._client_first is None else self._client_first.username
        return f"ScramServerSession(mechanism={self._mechanism}, stage={self._stage.name}, username={username!r})"

    __str__ = __repr__

    @property
    def mechanism(self) -> ScramMechanism:
        return self._mechanism

    @property
    def stage(self) -> ScramServerStage:
        return self._stage

    @property
    def username(self) -> str | None:
        """The user name the client *claimed* in client-first (for audit of failures), or None before it."""
        return None if self._client_first is None else self._client_first.username

    @property
    def authenticated_user(self) -> str:
        """The user name, once the proof has been verified.

        :raises ScramStateError: the exchange has not (successfully) completed.
        """
        client_first = self._client_first
        if self._stage is not ScramServerStage.AUTHENTICATED or client_first is None:
            raise self._state_error("authenticated_user")
        return client_first.username

    @property
    def authenticated_credential(self) -> ScramCredential:
        """The stored credential the client proved knowledge of (to compare with the store's later; its repr
        masks every secret).

        :raises ScramStateError: the exchange has not (successfully) completed.
        """
        credential = self._authenticated_credential
        if self._stage is not ScramServerStage.AUTHENTICATED or credential is None:
            raise self._state_error("authenticated_credential")
        return credential

    def receive_client_first(self, message: bytes) -> bytes:
        """Answer client-first with server-first (``r=<client nonce><server nonce>,s=<salt>,i=<iterations>``).

        :raises ScramProtocolError: malformed message, channel binding, ``tokenauth=true``, …
        :raises ScramAuthenticationError: ``a=`` differs from ``n=`` (Kafka's authorization-id message).
        :raises ScramStateError: not the expected step.
        :raises InvalidConfigError: the nonce factory returned an unusable nonce.
        """
        if self._stage is not ScramServerStage.CLIENT_FIRST:
            raise self._state_error("receive_client_first")
        try:
            client_first = parse_client_first(message)
            if client_first.authzid is not None and client_first.authzid != client_first.username:
                raise ScramAuthenticationError(AUTHORIZATION_ID_MISMATCH_MESSAGE)
            stored = self._lookup(client_first.username)
            # The decoy is derived for every user, known or not, so both paths do the same work.
            decoy = self._decoy_credential(client_first.username)
            known = (
                stored is not None
                and stored.mechanism is self._mechanism
                and stored.iterations >= self._mechanism.min_iterations
            )
            credential = stored if stored is not None and known else decoy
            server_nonce = self._nonce_factory()
            if not is_valid_nonce(server_nonce):
                raise InvalidConfigError("The SCRAM nonce factory must return non-empty printable ASCII without ','")
            server_first = ServerFirstMessage(
                nonce=client_first.nonce + server_nonce, salt=credential.salt, iterations=credential.iterations
            )
        except BaseException:
            self._fail()
            raise
        self._client_first = client_first
        self._exchange = _Exchange(client_first, server_first, credential, known)
        self._stage = ScramServerStage.CLIENT_FINAL
        return format_server_first(server_first)

    def receive_client_final(self, message: bytes) -> bytes:
        """Verify the proof and answer with server-final (``v=<server signature>``).

        :raises ScramProtocolError: malformed message, or ``c=`` not the client-first gs2 header.
        :raises ScramAuthenticationError: wrong nonce, wrong proof, unknown user (the generic message).
        :raises ScramStateError: not the expected step.
        """
        exchange = self._exchange
        if self._stage is not ScramServerStage.CLIENT_FINAL or exchange is None:
            raise self._state_error("receive_client_final")
        client_first, server_first, credential = exchange.client_first, exchange.server_first, exchange.credential
        try:
            client_final = parse_client_final(message)
            if client_final.channel_binding != client_first.gs2_header.encode("utf-8"):
                raise ScramProtocolError(
                    "SCRAM client-final channel binding c= must be the base64 of the client-first gs2 header"
                )
            if client_final.nonce != server_first.nonce:
                raise ScramAuthenticationError(self._failure_message)
            hash_name = self._mechanism.hash_name
            if len(client_final.proof) != self._mechanism.digest_size:
                raise ScramProtocolError(
                    f"SCRAM client proof has {len(client_final.proof)} bytes; "
                    f"{self._mechanism} proofs have {self._mechanism.digest_size}"
                )
            auth_message = f"{client_first.bare},{server_first.text},{client_final.without_proof}".encode()
            client_signature = hmac.digest(credential.stored_key, auth_message, hash_name)
            client_key = _xor(client_signature, client_final.proof)
            proof_matches = hmac.compare_digest(hashlib.new(hash_name, client_key).digest(), credential.stored_key)
            # Both conditions are always evaluated: a decoy goes through the same work as a real user.
            if not (proof_matches & exchange.known_user):
                raise ScramAuthenticationError(self._failure_message)
            server_signature = hmac.digest(credential.server_key, auth_message, hash_name)
        except BaseException:
            self._fail()
            raise
        self._exchange = None
        self._authenticated_credential = credential
        self._stage = ScramServerStage.AUTHENTICATED
        return format_server_final(ServerFinalMessage(verifier=server_signature))

    def _state_error(self, called: str) -> ScramStateError:
        return ScramStateError(
            f"SCRAM server session: {called} is not allowed in stage {self._stage.name}; "
            f"the next step is {self._stage.value}"
        )

    def _fail(self) -> None:
        self._stage = ScramServerStage.FAILED
        self._exchange = None

    def _decoy_credential(self, username: str) -> ScramCredential:
        """Deterministic per (secret, mechanism, name, profile); unrelated to any password, so no proof can match
        it."""
        return decoy_credential(self._decoy_secret, self._mechanism, username, self._decoy_profile)


@dataclass(frozen=True, slots=True)
class _Exchange:
    """What client-final is checked against. Never printed: the repr is masked like the credential's."""

    client_first: ClientFirstMessage
    server_first: ServerFirstMessage
    credential: ScramCredential = field(repr=False)
    known_user: bool = field(repr=False)


def _xor(left: bytes, right: bytes) -> bytes:
    return (int.from_bytes(left, "big") ^ int.from_bytes(right, "big")).to_bytes(len(left), "big")
