"""Passwords checked against the SCRAM credentials in the store, for the console's HTTP Basic logins and the Kafka
listeners' SASL/PLAIN.

A password is checked as a SCRAM server would check a proof, without the exchange: derive ``SaltedPassword =
PBKDF2(password, salt, iterations)``, then ``StoredKey = H(HMAC(SaltedPassword, "Client Key"))`` and compare it with
the stored StoredKey in constant time. SCRAM-SHA-512 is used when the user has it, else SCRAM-SHA-256.

PBKDF2 costs milliseconds (4096–16384 iterations), and a browser sends the password with every request, so a
successful check is cached for ``ttl_seconds``, keyed by (user, HMAC of the password under a per-process random key) —
the cache never holds a password. A cached entry is used only while the stored credential is the one it was checked
against (same mechanism, salt, iterations and StoredKey, looked up again on every request in the credential service's
in-memory snapshot), so a password change or deletion takes effect at once.

What a failure costs must not show in when it is answered (the console answers every refused login at one fixed time
after its request arrived, ``kafkaguard.console.failure_timing``; SASL/PLAIN answers every failure after
``auth_failure_delay_ms``), so the check is bounded: only a credential within its mechanism's iteration bounds
(Kafka's 4096–16384) is derived; a user whose strongest credential is outside them is checked with its next
mechanism's, or, with none left, treated as unknown. An unknown user still costs one decoy derivation, shaped like the
stored credentials (``scram.decoy``): it takes the same failed login from the budget and the same place on the pool as
a wrong password would, so neither a 429 nor a late answer under load tells whether the user exists.

Every derivation, real or decoy, runs on a bounded ``DerivationPool`` (``kafkaguard.passwords.throttle``) and first
takes its failed login from the process's ``LoginFailureBudget`` (``kafkaguard.identity.failure_budget``), per client
address and per user name, given back when the password was right; a cached login uses neither, so a flood of wrong
passwords cannot slow down users who are logged in. The budget's known pairs are keyed with an HMAC of the password
as well (``secret``): only the right password is exempt from a spent address budget, so a refusal or its absence
tells nothing about the name.
"""

from __future__ import annotations

import asyncio
import hmac
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from kafkaguard.identity.failure_budget import Attempt, LoginFailureBudget
from kafkaguard.passwords.throttle import DerivationPool, LoginThrottledError
from kafkaguard.scram import ScramCredential, ScramMechanism, decoy_credential, salted_password
from kafkaguard.scram.credential import stored_key_of
from kafkaguard.service.credentials import CredentialService

#: Mechanisms tried for a user, strongest first.
PREFERENCE = (ScramMechanism.SCRAM_SHA_512, ScramMechanism.SCRAM_SHA_256)
DEFAULT_TTL_SECONDS = 60.0
DEFAULT_MAX_ENTRIES = 1024


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


class PasswordChecker:
    """Checks user/password pairs against a CredentialService; for one event loop. ``mechanism``: what its failures
    are counted as in the budget (``console``, ``PLAIN``)."""

    def __init__(
        self,
        credentials: CredentialService,
        pool: DerivationPool,
        budget: LoginFailureBudget,
        *,
        mechanism: str,
        ttl_seconds: float = DEFAULT_TTL_SECONDS,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._credentials = credentials
        self.pool = pool
        self._budget = budget
        self._mechanism = mechanism
        self._ttl = ttl_seconds
        self._max_entries = max_entries
        self._clock = clock
        self._key = secrets.token_bytes(32)
        self._cache: OrderedDict[tuple[str, bytes], _Verified] = OrderedDict()
        #: Full PBKDF2 derivations done for existing users (tests and metrics read it).
        self.derivations = 0
        #: The checks under way, by cache key: (credential or None, the error that ended it) when done.
        self._checking: dict[tuple[str, bytes], asyncio.Future[tuple[ScramCredential | None, Exception | None]]] = {}

    def _find(self, user: str) -> ScramCredential | None:
        """``user``'s credential of the strongest mechanism it has one for within that mechanism's iteration bounds.

        Why the bounds: a credential above the maximum (only other tooling writing the store could make one: the
        credential service refuses it) would cost more than the fixed failure time allows — PBKDF2's cost grows with its
        iterations, and one million take longer than that time (see docs/benchmarks.md, "Figures from the code") — and
        so tell its user apart; below the minimum, the SCRAM server refuses it as well."""
        for mechanism in PREFERENCE:
            credential = self._credentials.lookup(user, mechanism)
            if credential is not None and mechanism.min_iterations <= credential.iterations <= mechanism.max_iterations:
                return credential
        return None

    async def verify(self, user: str, password: str, client: str) -> ScramCredential | None:
        """The stored credential ``password`` is right for — ``user``'s of the strongest mechanism it has — or None
        when it is wrong or the user is unknown; ``client`` is the caller's address. Failures are counted against
        ``client`` and ``user`` in the budget.

        :raises LoginThrottledError: checking needs a derivation, and the budget refuses it (``client`` or ``user``
            has no failed login left) or the pool is full (never for a login the cache answers).
        """
        key = self._cache_key(user, password)
        self.refuse_early(user, password, client)
        checking = self._checking.get(key)
        if checking is not None:
            # The same name and password are being checked already (a client opening several connections at once,
            # its cache entry cold): wait for that answer instead of deriving again, or using up the budget.
            credential, error = await asyncio.shield(checking)
            if error is not None:
                raise error
            return credential
        checking = self._checking[key] = asyncio.get_running_loop().create_future()
        try:
            credential = await self._verify(key, user, password, client)
        except LoginThrottledError as e:
            checking.set_result((None, e))
            raise
        except BaseException:
            checking.set_result((None, LoginThrottledError("the check was interrupted; retry after 1 s", 1)))
            raise
        else:
            checking.set_result((credential, None))
        finally:
            del self._checking[key]
        return credential

    async def _verify(self, key: tuple[str, bytes], user: str, password: str, client: str) -> ScramCredential | None:
        credential = self._find(user)  # the credential service's in-memory snapshot: no I/O, no thread hop
        now = self._clock()
        cached = self._cache.get(key)
        if credential is not None and cached is not None and cached.still_valid(credential, now):
            return credential
        self._cache.pop(key, None)
        if credential is None:
            # The same work as a real check of a typical user (the stored users' most common iteration count) and
            # the same budget and pool place, so that neither a 429 nor load reveals whether the user exists.
            mechanism = PREFERENCE[0]
            decoy = decoy_credential(self._key, mechanism, user, self._credentials.decoy_profile(mechanism))
            _derived, attempt = await self._derive(key, decoy, password, client)
            self._budget.failed(attempt)
            return None
        derived, attempt = await self._derive(key, credential, password, client)
        self.derivations += 1
        if not hmac.compare_digest(derived, credential.stored_key):
            self._budget.failed(attempt)
            return None
        self._budget.succeeded(attempt)  # only failures use up the budget
        self._remember(key, credential, now)
        return credential

    async def authenticate(self, user: str, password: str, client: str) -> bool:
        """Whether ``password`` is ``user``'s (``verify``).

        :raises LoginThrottledError: as ``verify``.
        """
        return await self.verify(user, password, client) is not None

    def refuse_early(self, user: str, password: str, client: str) -> None:
        """Refuse, before any work, a login that is not in the cache from a client with no failed login left: no
        store lookup, no derivation, and the same answer whether the user exists or not. Cheap (one HMAC), so the
        console calls it before routing too (``kafkaguard.console.gate``).

        :raises LoginThrottledError: as said.
        """
        key = self._cache_key(user, password)
        if key not in self._cache:
            self._budget.check(self._mechanism, client, user, secret=key[1])

    def _cache_key(self, user: str, password: str) -> tuple[str, bytes]:
        return user, hmac.digest(self._key, password.encode("utf-8", "surrogatepass"), "sha256")

    async def _derive(
        self, key: tuple[str, bytes], credential: ScramCredential, password: str, client: str
    ) -> tuple[bytes, Attempt]:
        """The StoredKey ``password`` yields under ``credential``, derived on the pool and paid for with a failed
        login of ``client`` and the user (the caller says how the check ended: ``succeeded`` gives it back).

        :raises LoginThrottledError: the budget refuses, or the pool is full.
        """
        attempt = self._budget.take(self._mechanism, client, key[0], secret=key[1])
        try:
            return await self.pool.run(stored_key_for, credential, password), attempt
        except LoginThrottledError:
            self._budget.cancelled(attempt)  # the pool is full: nothing was checked
            raise

    def _remember(self, key: tuple[str, bytes], credential: ScramCredential, now: float) -> None:
        self._cache[key] = _Verified(
            credential.mechanism, credential.salt, credential.iterations, credential.stored_key, now + self._ttl
        )
        self._cache.move_to_end(key)
        while len(self._cache) > self._max_entries:
            self._cache.popitem(last=False)
