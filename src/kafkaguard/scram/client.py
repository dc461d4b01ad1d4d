"""The client side of one SASL/SCRAM exchange (RFC 5802 §5, RFC 7677, Kafka's ``ScramSaslClient``): an I/O-free
state machine, for logging in to an upstream Kafka cluster with a service credential.

::

    cache = SaltedPasswordCache()                                  # one per credential, shared by its connections
    session = ScramClientSession(ScramMechanism.SCRAM_SHA_512, username, password, salted_password_cache=cache)
    server_first = send(session.first_message())                   # stage FIRST -> FINAL
    server_final = send(session.final_message(server_first))       # stage FINAL -> SERVER_FINAL
    session.verify_server_final(server_final)                      # stage SERVER_FINAL -> AUTHENTICATED

The client checks what Kafka's client checks, and a little more:

* the server nonce must extend the client nonce (Kafka: "starts with"; here it must also add at least one character);
* the iteration count must be at least the mechanism's minimum (4096, as Kafka's client) and at most
  :data:`MAX_SERVER_ITERATIONS`, so a broken or hostile upstream cannot make the client spend minutes in PBKDF2;
* server-final ``e=`` fails with the server's error, and ``v=`` must be the server signature (constant-time
  comparison), so a server that does not know the credential cannot pass itself off as the cluster.

Any failure moves the session to FAILED; the exchange must start over with a new session. The password is never in
a repr, str or error message, and the session drops it as soon as the proof is computed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import threading
from collections import OrderedDict
from enum import Enum

from kafkaguard.errors import InvalidConfigError, ScramAuthenticationError, ScramProtocolError, ScramStateError
from kafkaguard.scram.credential import salted_password
from kafkaguard.scram.mechanism import ScramMechanism
from kafkaguard.scram.messages import (
    ClientFinalMessage,
    ClientFirstMessage,
    format_client_final,
    format_client_first,
    is_valid_nonce,
    parse_server_final,
    parse_server_first,
)
from kafkaguard.scram.server import default_nonce

#: Most iterations a server-first may ask for. Above ``ScramMechanism.max_iterations`` (Kafka's 16384 for new
#: credentials) on purpose: Kafka's own client checks only the minimum, so the proxy should not refuse a cluster that
#: Kafka's client logs in to (a credential stored by other tooling may use more). One million PBKDF2 rounds are
#: about a second of CPU: the most a broken or hostile upstream can make one login cost.
MAX_SERVER_ITERATIONS = 1_000_000

#: Entries a :class:`SaltedPasswordCache` keeps by default (one upstream credential needs one).
DEFAULT_CACHE_ENTRIES = 16


class SaltedPasswordCache:
    """Salted passwords (``Hi(password, salt, i)``) by (mechanism, salt, iterations, password); thread-safe, bounded
    (least recently used entries go first).

    Why: PBKDF2 is deliberately slow (4096 to 16384 HMAC rounds, milliseconds each login), and a Kafka server
    answers the same user with the same salt and iteration count every time (the stored credential's). A proxy that
    opens a connection per upstream broker, and again after every reconnect, would otherwise repeat the same
    derivation for each one; with a shared cache it derives once per salt. A new salt (the credential was changed on
    the cluster) is simply a new entry.

    The password is part of the key, so a cache shared by sessions with different passwords (a rotated service
    password, two credentials) never hands one the other's salted password. The entries are password-equivalent for
    SCRAM (they log in without the password): the cache never prints them, and lives only in memory.

    The lock is held while deriving, so concurrent sessions missing the same entry derive it once (the others wait
    for it instead of repeating it).
    """

    __slots__ = ("_entries", "_lock", "_max_entries")

    def __init__(self, max_entries: int = DEFAULT_CACHE_ENTRIES) -> None:
        """:raises InvalidConfigError: ``max_entries`` below 1."""
        if max_entries < 1:
            raise InvalidConfigError(f"A salted password cache must hold at least one entry; got {max_entries}")
        self._max_entries = max_entries
        self._lock = threading.Lock()
        self._entries: OrderedDict[tuple[ScramMechanism, bytes, int, str], bytes] = OrderedDict()

    def __repr__(self) -> str:
        return f"SaltedPasswordCache(entries={len(self)}, max_entries={self._max_entries})"

    __str__ = __repr__

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def salted_password(self, mechanism: ScramMechanism, password: str, salt: bytes, iterations: int) -> bytes:
        """``Hi(password, salt, iterations)`` from the cache, derived (and kept) on a miss."""
        key = (mechanism, salt, iterations, password)
        with self._lock:
            salted = self._entries.get(key)
            if salted is None:
                salted = salted_password(mechanism, password, salt, iterations)
                self._entries[key] = salted
                if len(self._entries) > self._max_entries:
                    self._entries.popitem(last=False)
            else:
                self._entries.move_to_end(key)
            return salted


class ScramClientStage(Enum):
    """Where a :class:`ScramClientSession` is; the value names the method expected next."""

    FIRST = "first_message"
    FINAL = "final_message"
    SERVER_FINAL = "verify_server_final"
    AUTHENTICATED = "nothing (the server proved it knows the credential)"
    FAILED = "nothing (the exchange failed; start a new session)"


class ScramClientSession:
    """One SCRAM exchange, client side. Not thread-safe; one session per connection and login.

    :param mechanism: the SASL mechanism sent in SaslHandshake.
    :param username: the user to log in as (escaped in client-first as RFC 5802 says; no SASLprep, as Kafka).
    :param password: its password (UTF-8, no SASLprep, as Kafka); never printed.
    :param nonce: the client nonce; injected so tests replay RFC 7677 byte for byte. Default: 192 random bits.
    :param salted_password_cache: shared by the sessions of one credential so PBKDF2 runs once per salt; without
        one every session derives.
    :raises InvalidConfigError: empty user name or password, a NUL in the user name, a password that is not
        encodable as UTF-8, or a nonce that is not non-empty printable ASCII without ",".
    """

    __slots__ = ("_cache", "_client_first", "_mechanism", "_password", "_server_signature", "_stage")

    def __init__(
        self,
        mechanism: ScramMechanism,
        username: str,
        password: str,
        *,
        nonce: str | None = None,
        salted_password_cache: SaltedPasswordCache | None = None,
    ) -> None:
        if not username or "\x00" in username:
            raise InvalidConfigError("The SCRAM user name must be non-empty and must not contain NUL")
        if not password:
            raise InvalidConfigError("The SCRAM password must be non-empty")
        # Not raised inside the except clause: the UnicodeEncodeError holds the password (see messages._decode).
        encodable = True
        try:
            password.encode("utf-8")
        except UnicodeEncodeError:
            encodable = False
        if not encodable:
            raise InvalidConfigError("The SCRAM password must be encodable as UTF-8 (it contains a lone surrogate)")
        nonce = default_nonce() if nonce is None else nonce
        if not is_valid_nonce(nonce):
            raise InvalidConfigError("The SCRAM client nonce must be non-empty printable ASCII without ','")
        self._mechanism = mechanism
        self._client_first = ClientFirstMessage(username=username, nonce=nonce)
        self._password: str | None = password
        self._cache = salted_password_cache
        #: Only while waiting for server-final: the signature the server must send.
        self._server_signature: bytes | None = None
        self._stage = ScramClientStage.FIRST

    def __repr__(self) -> str:
        return (
            f"ScramClientSession(mechanism={self._mechanism}, stage={self._stage.name}, "
            f"username={self._client_first.username!r})"
        )

    __str__ = __repr__

    @property
    def mechanism(self) -> ScramMechanism:
        return self._mechanism

    @property
    def stage(self) -> ScramClientStage:
        return self._stage

    @property
    def username(self) -> str:
        return self._client_first.username

    def first_message(self) -> bytes:
        """client-first: ``n,,n=<escaped user name>,r=<client nonce>``.

        :raises ScramStateError: not the expected step.
        """
        if self._stage is not ScramClientStage.FIRST:
            raise self._state_error("first_message")
        self._stage = ScramClientStage.FINAL
        return format_client_first(self._client_first)

    def final_message(self, server_first: bytes) -> bytes:
        """Check server-first and answer with client-final (``c=biws,r=<nonce>,p=<client proof>``).

        :raises ScramProtocolError: malformed server-first, a server nonce that does not extend the client nonce,
            or an iteration count below the mechanism's minimum or above :data:`MAX_SERVER_ITERATIONS`.
        :raises ScramStateError: not the expected step.
        """
        password = self._password
        if self._stage is not ScramClientStage.FINAL or password is None:
            raise self._state_error("final_message")
        client_first = self._client_first
        mechanism = self._mechanism
        try:
            parsed = parse_server_first(server_first)
            if not (parsed.nonce.startswith(client_first.nonce) and len(parsed.nonce) > len(client_first.nonce)):
                raise ScramProtocolError("Invalid SCRAM server nonce: it does not extend the client nonce")
            if parsed.iterations < mechanism.min_iterations:
                raise ScramProtocolError(
                    f"SCRAM server asks for {parsed.iterations} iterations; "
                    f"{mechanism} requires at least {mechanism.min_iterations}"
                )
            if parsed.iterations > MAX_SERVER_ITERATIONS:
                raise ScramProtocolError(
                    f"SCRAM server asks for {parsed.iterations} iterations; "
                    f"at most {MAX_SERVER_ITERATIONS} are accepted"
                )
            if self._cache is None:
                salted = salted_password(mechanism, password, parsed.salt, parsed.iterations)
            else:
                salted = self._cache.salted_password(mechanism, password, parsed.salt, parsed.iterations)
            hash_name = mechanism.hash_name
            client_key = hmac.digest(salted, b"Client Key", hash_name)
            stored_key = hashlib.new(hash_name, client_key).digest()
            server_key = hmac.digest(salted, b"Server Key", hash_name)
            # The proof is filled in below: it signs client-final-message-without-proof, which ignores it.
            unsigned = ClientFinalMessage(
                channel_binding=client_first.gs2_header.encode("utf-8"), nonce=parsed.nonce, proof=b"\x00"
            )
            # server-first exactly as received (parse_server_first accepted it, so it is UTF-8), as the server used it.
            auth_message = f"{client_first.bare},{server_first.decode('utf-8')},{unsigned.without_proof}".encode()
            proof = _xor(client_key, hmac.digest(stored_key, auth_message, hash_name))
            client_final = dataclasses.replace(unsigned, proof=proof)
            server_signature = hmac.digest(server_key, auth_message, hash_name)
        except BaseException:
            self._fail()
            raise
        self._password = None
        self._server_signature = server_signature
        self._stage = ScramClientStage.SERVER_FINAL
        return format_client_final(client_final)

    def verify_server_final(self, server_final: bytes) -> None:
        """Check server-final: the server's signature proves it knows the credential.

        :raises ScramAuthenticationError: the server sent ``e=`` (the message carries its error), or a wrong
            signature.
        :raises ScramProtocolError: malformed server-final.
        :raises ScramStateError: not the expected step.
        """
        expected = self._server_signature
        if self._stage is not ScramClientStage.SERVER_FINAL or expected is None:
            raise self._state_error("verify_server_final")
        try:
            parsed = parse_server_final(server_final)
            if parsed.error is not None:
                raise ScramAuthenticationError(
                    f"SCRAM authentication with {self._mechanism} failed with the server's error: {parsed.error!r}"
                )
            if parsed.verifier is None or not hmac.compare_digest(parsed.verifier, expected):
                raise ScramAuthenticationError("Invalid SCRAM server signature in the server-final message")
        except BaseException:
            self._fail()
            raise
        self._server_signature = None
        self._stage = ScramClientStage.AUTHENTICATED

    def _state_error(self, called: str) -> ScramStateError:
        return ScramStateError(
            f"SCRAM client session: {called} is not allowed in stage {self._stage.name}; "
            f"the next step is {self._stage.value}"
        )

    def _fail(self) -> None:
        self._stage = ScramClientStage.FAILED
        self._password = None
        self._server_signature = None


def _xor(left: bytes, right: bytes) -> bytes:
    return (int.from_bytes(left, "big") ^ int.from_bytes(right, "big")).to_bytes(len(left), "big")
