"""HTTP Basic authentication against the SCRAM credentials in the store.

A password is checked as a SCRAM server would check a proof, without the exchange: derive
``SaltedPassword = PBKDF2(password, salt, iterations)``, then ``StoredKey = H(HMAC(SaltedPassword, "Client Key"))``
and compare it with the stored StoredKey in constant time. SCRAM-SHA-512 is used when the user has it, else
SCRAM-SHA-256.

PBKDF2 costs milliseconds (4096–16384 iterations), and a browser sends the password with every request, so a
successful check is cached for ``ttl_seconds``, keyed by (user, HMAC of the password under a per-process random
key) — the cache never holds a password. A cached entry is used only while the stored credential is the one it
was checked against (same mechanism, salt, iterations and StoredKey, re-read from the store on every request),
so a password change or deletion takes effect at once. An unknown user costs one decoy derivation, so the
response time does not tell whether a user exists.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hmac
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from kafkaguard.model import RequestContext
from kafkaguard.scram import ScramCredential, ScramMechanism, salted_password
from kafkaguard.scram.credential import stored_key_of
from kafkaguard.service.credentials import CredentialService

#: Mechanisms tried for a user, strongest first.
PREFERENCE = (ScramMechanism.SCRAM_SHA_512, ScramMechanism.SCRAM_SHA_256)
DEFAULT_TTL_SECONDS = 60.0
DEFAULT_MAX_ENTRIES = 1024


@dataclass(frozen=True, slots=True)
class BasicCredentials:
    user: str
    password: str

    def __repr__(self) -> str:
        return f"BasicCredentials(user={self.user!r}, password=<masked>)"


def parse_basic(header: str | None) -> BasicCredentials | None:
    """``Basic base64(user:password)`` (UTF-8, RFC 7617) → credentials; None when absent or malformed."""
    if not header:
        return None
    scheme, _, param = header.strip().partition(" ")
    if scheme.lower() != "basic" or not param:
        return None
    try:
        decoded = base64.b64decode(param.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    user, colon, password = decoded.partition(":")
    if not colon or not user:
        return None
    return BasicCredentials(user, password)


@dataclass(frozen=True, slots=True)
class Caller:
    """An authenticated console user: the principal ``User:<name>`` from the client's address."""

    user: str
    host: str

    @property
    def principal(self) -> str:
        return f"User:{self.user}"

    @property
    def context(self) -> RequestContext:
        return RequestContext(self.principal, self.host)


@dataclass(frozen=True, slots=True)
class _Verified:
    mechanism: ScramMechanism
    salt: bytes
    iterations: int
    stored_key: bytes
    expires: float

    def still_valid(self, credential: ScramCredential, now: float) -> bool:
        return (
            now < self.expires
            and credential.mechanism is self.mechanism
            and credential.iterations == self.iterations
            and hmac.compare_digest(credential.salt, self.salt)
            and hmac.compare_digest(credential.stored_key, self.stored_key)
        )


def stored_key_for(credential: ScramCredential, password: str) -> bytes:
    """The StoredKey ``password`` yields with ``credential``'s salt and iterations (PBKDF2: call off the loop)."""
    salted = salted_password(credential.mechanism, password, credential.salt, credential.iterations)
    return stored_key_of(credential.mechanism, salted)


class BasicAuthenticator:
    """Checks user/password pairs against a CredentialService; thread-safe enough for one event loop."""

    def __init__(
        self,
        credentials: CredentialService,
        *,
        ttl_seconds: float = DEFAULT_TTL_SECONDS,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._credentials = credentials
        self._ttl = ttl_seconds
        self._max_entries = max_entries
        self._clock = clock
        self._key = secrets.token_bytes(32)
        self._cache: OrderedDict[tuple[str, bytes], _Verified] = OrderedDict()
        #: Full PBKDF2 derivations done (tests and metrics read it).
        self.derivations = 0

    def _find(self, user: str) -> ScramCredential | None:
        for mechanism in PREFERENCE:
            credential = self._credentials.lookup(user, mechanism)
            if credential is not None:
                return credential
        return None

    async def authenticate(self, user: str, password: str) -> bool:
        """True iff ``password`` is ``user``'s password for the strongest mechanism the user has.

        :raises StoreError: the store cannot be read.
        """
        credential = await asyncio.to_thread(self._find, user)
        key = (user, hmac.digest(self._key, password.encode("utf-8", "surrogatepass"), "sha256"))
        now = self._clock()
        if credential is None:
            # The same work as a real check, so that timing does not reveal whether the user exists.
            decoy = ScramCredential(ScramMechanism.SCRAM_SHA_512, self._key, b"", b"", 4096)
            await asyncio.to_thread(stored_key_for, decoy, password)
            self._cache.pop(key, None)
            return False
        cached = self._cache.get(key)
        if cached is not None and cached.still_valid(credential, now):
            return True
        self.derivations += 1
        derived = await asyncio.to_thread(stored_key_for, credential, password)
        if not hmac.compare_digest(derived, credential.stored_key):
            self._cache.pop(key, None)
            return False
        self._remember(key, credential, now)
        return True

    def _remember(self, key: tuple[str, bytes], credential: ScramCredential, now: float) -> None:
        self._cache[key] = _Verified(
            credential.mechanism, credential.salt, credential.iterations, credential.stored_key, now + self._ttl
        )
        self._cache.move_to_end(key)
        while len(self._cache) > self._max_entries:
            self._cache.popitem(last=False)
