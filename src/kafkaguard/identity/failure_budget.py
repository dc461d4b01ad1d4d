"""One budget of failed logins per process, for every way a client logs in: SCRAM, PLAIN, OAUTHBEARER, client
certificates (mutual TLS) and the console's HTTP Basic (``Services.login_budget``, so the console and the Kafka
listeners of ``serve --http-listener`` draw from the same one).

Failures are counted **per client address** (``model.client_key``: IPv4 per address, IPv6 per
``ipv6_prefix_length`` block, since one host holds a whole /64) **and per user name claimed** (SCRAM, PLAIN and the
console; a token or a certificate is not guessed name by name, so OAUTHBEARER and mTLS count per address only).
Each is a token bucket: ``burst`` failures at once, ``per_minute`` regained a minute.

How a login uses it: :meth:`take` before the check that is expensive or tells the answer (PBKDF2; the SCRAM proof;
a token's signature and key lookup; a TLS handshake), then :meth:`succeeded` (the tokens come back: only failures
spend the budget) or :meth:`failed`; :meth:`cancelled` when nothing was checked. :meth:`check` asks the same
question without taking (SCRAM's client-first, the console's gate), so a refused client costs a dict lookup.

A check that is someone else's and may take a while (a login passed through to the broker) asks without holding:
:meth:`check` before it, then :meth:`refused` (spends what :meth:`take` would have taken, as far as there is any
left) or :meth:`remember` (the known pair, as :meth:`succeeded`). Nothing is held while the answer is awaited, so
many right logins of one address at once never count as failures; the price is that a flood of wrong ones can pass
the budget by the logins in flight at once (bounded by the connection limits per address).

The rules, for a login from address A claiming user U:

1. A's bucket is empty → refused (whoever U is), unless (U, A) is a **known pair**: U logged in successfully from A
   within ``success_memory_seconds``, proving the same secret where the mechanism has one before its check (PLAIN
   and the console pass an HMAC of the password, so only the right password is exempt; SCRAM has nothing before its
   proof, so there the pair is U and A). A known pair takes nothing from A's bucket.
2. U's bucket is empty → refused **only if A is failing**: it failed a login (any user, any mechanism) within
   ``failure_memory_seconds``, or its own bucket is spent. From a clean address U's owner is always checked, so
   guessing U's password can never lock U out, and nothing here is a hard lockout (Kafka has none either).
3. Otherwise the login is checked, and takes one token from each bucket that has one.

Why the known-pair exemption: a client that keeps failing behind a NAT (a pod with an old password on a Kubernetes
node) spends its address's bucket for everyone behind it; the exemption lets its neighbours' established users keep
logging in, while their failures still spend their user's bucket. What it costs: a client at an address whose bucket
is spent can tell, for a name, whether that name logged in from the same address recently (it is checked instead of
refused), which says that the user exists. With PLAIN and the console the exemption needs the right password, so
they tell nothing; SCRAM shares the price. ``success_memory_seconds`` 0 turns the exemption off.

A refusal raises :class:`LoginThrottledError`: "Too many failed logins from A; retry after N s" (or "… for this user
name …"), N the seconds until the next token is due (or A stops failing). Refusals depend only on the name claimed,
never on whether it exists: an unknown user's check spends the same tokens (the decoys of ``passwords.checker`` and
``scram.server`` fail like a wrong password). Refusals are counted by mechanism and kind (``throttled_counts``; the
console exports ``kafkaguard_login_throttled_total{mechanism,key}``).

Worked example (address burst 10, 30 a minute; user burst 20, 10 a minute; failure memory 600 s): 16 addresses guess
alice's password as fast as they can. The first 20 guesses are checked and fail, and every address that guessed is
failing; later guesses from them are refused with "retry after 6 s" (alice's next token), and one is checked every
6 s. An address that had not failed yet gets one check, then is failing too. Alice, logging in from her own
address, is checked and succeeds: ~10 guesses a minute against alice (plus one per address new to the flood each
failure memory), where per-address budgets alone allowed 16 × 30, and no lockout.

Memory is bounded: at most ``max_keys`` addresses, user names and known pairs each (least recently used forgotten
first; a forgotten key starts again with a full bucket, which is the state it was converging to). A user name is
kept only as a 16-byte keyed BLAKE2b digest, whatever its length: no names in memory, constant size per entry, and
collisions cannot be aimed (the key is random per process). Cost model: every call is O(1): two or three dict
lookups and a hash of the name. For one event loop (no lock), except ``throttled_counts``, which any thread may read.
"""

from __future__ import annotations

import hashlib
import math
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from kafkaguard.errors import KafkaguardError
from kafkaguard.model.host import DEFAULT_IPV6_PREFIX_LENGTH, client_key

#: Keys (addresses, user names, known pairs) remembered in each table; the least recently used is forgotten first.
DEFAULT_MAX_KEYS = 10_000
DEFAULT_ADDRESS_BURST = 10
DEFAULT_ADDRESS_PER_MINUTE = 30.0
DEFAULT_USER_BURST = 20
DEFAULT_USER_PER_MINUTE = 10.0
DEFAULT_FAILURE_MEMORY_SECONDS = 600.0
DEFAULT_SUCCESS_MEMORY_SECONDS = 86_400.0
_DIGEST_BYTES = 16


class LoginThrottledError(KafkaguardError):
    """A login refused before it was checked (SASL_AUTHENTICATION_FAILED, HTTP 429): ``retry_after_seconds`` until it
    may be tried again."""

    def __init__(self, message: str, retry_after_seconds: int) -> None:
        super().__init__(message)
        self.retry_after_seconds = retry_after_seconds


class BudgetKey(Enum):
    """Which bucket refused a login; the value is the metric label."""

    ADDRESS = "address"
    USER = "user"


@dataclass(slots=True)
class _Bucket:
    tokens: float
    updated: float
    #: For an address: when it last failed a login (clock seconds; -inf: never).
    failed_at: float = -math.inf


@dataclass(frozen=True, slots=True)
class Attempt:
    """The tokens one login took (:meth:`LoginFailureBudget.take`), to give back or keep when it ends."""

    mechanism: str
    address: str
    user: bytes | None
    pair: bytes | None
    took_address: bool
    took_user: bool


class _Table:
    """Token buckets by key, refilled lazily, least recently used first out beyond ``max_keys``."""

    __slots__ = ("_buckets", "burst", "max_keys", "per_second")

    def __init__(self, burst: int, per_minute: float, max_keys: int) -> None:
        self.burst = float(burst)
        self.per_second = per_minute / 60.0
        self.max_keys = max_keys
        self._buckets: OrderedDict[object, _Bucket] = OrderedDict()

    def __len__(self) -> int:
        return len(self._buckets)

    def get(self, key: object, now: float) -> _Bucket:
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = _Bucket(self.burst, now)
            while len(self._buckets) > self.max_keys:
                self._buckets.popitem(last=False)
        else:
            if now > bucket.updated:
                bucket.tokens = min(self.burst, bucket.tokens + (now - bucket.updated) * self.per_second)
                bucket.updated = now
            self._buckets.move_to_end(key)
        return bucket

    def seconds_to_token(self, bucket: _Bucket) -> float:
        return (1.0 - bucket.tokens) / self.per_second

    def give_back(self, key: object, now: float) -> None:
        bucket = self.get(key, now)
        bucket.tokens = min(self.burst, bucket.tokens + 1.0)


class LoginFailureBudget:
    """The failed-login budget of one process (see the module docstring)."""

    def __init__(
        self,
        *,
        address_burst: int = DEFAULT_ADDRESS_BURST,
        address_per_minute: float = DEFAULT_ADDRESS_PER_MINUTE,
        user_burst: int = DEFAULT_USER_BURST,
        user_per_minute: float = DEFAULT_USER_PER_MINUTE,
        failure_memory_seconds: float = DEFAULT_FAILURE_MEMORY_SECONDS,
        success_memory_seconds: float = DEFAULT_SUCCESS_MEMORY_SECONDS,
        ipv6_prefix_length: int = DEFAULT_IPV6_PREFIX_LENGTH,
        max_keys: int = DEFAULT_MAX_KEYS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if min(address_burst, user_burst) < 1 or min(address_per_minute, user_per_minute) <= 0:
            raise ValueError("login failure budgets need a burst of at least 1 and a positive rate")
        self._addresses = _Table(address_burst, address_per_minute, max_keys)
        self._users = _Table(user_burst, user_per_minute, max_keys)
        self._known: OrderedDict[bytes, float] = OrderedDict()  # pair digest -> until when it is known
        self._failure_memory = failure_memory_seconds
        self._success_memory = success_memory_seconds
        self._ipv6_prefix_length = ipv6_prefix_length
        self._max_keys = max_keys
        self._clock = clock
        self._key = secrets.token_bytes(32)
        self._lock = threading.Lock()
        self._throttled: dict[tuple[str, str], int] = {}

    def __repr__(self) -> str:
        return (
            f"LoginFailureBudget(addresses={len(self._addresses)}, users={len(self._users)}, "
            f"known_pairs={len(self._known)})"
        )

    def reconfigure(
        self, *, address_burst: int, address_per_minute: float, user_burst: int, user_per_minute: float
    ) -> None:
        """New bursts and rates (a SIGHUP, ``node.live``): buckets keep their tokens, capped at the new burst, and
        refill at the new rate from their next use."""
        if min(address_burst, user_burst) < 1 or min(address_per_minute, user_per_minute) <= 0:
            raise ValueError("login failure budgets need a burst of at least 1 and a positive rate")
        with self._lock:
            for table, burst, per_minute in (
                (self._addresses, address_burst, address_per_minute),
                (self._users, user_burst, user_per_minute),
            ):
                table.burst = float(burst)
                table.per_second = per_minute / 60.0
                for bucket in table._buckets.values():
                    bucket.tokens = min(bucket.tokens, table.burst)

    # ------------------------------------------------------------------------------------------------- the API

    def check(self, mechanism: str, address: str, user: str | None = None, *, secret: bytes = b"") -> None:
        """Refuse now what :meth:`take` would refuse, without taking anything.

        :raises LoginThrottledError: as :meth:`take`.
        """
        self._decide(mechanism, address, user, secret)

    def take(self, mechanism: str, address: str, user: str | None = None, *, secret: bytes = b"") -> Attempt:
        """Take this login's tokens before it is checked. ``mechanism`` is a label from a fixed set (``SCRAM-SHA-256``,
        ``PLAIN``, ``OAUTHBEARER``, ``SSL``, ``console``), ``address`` the client's (as ``java_host`` prints it),
        ``user`` the name it claimed (None: counted per address only), ``secret`` what it proved besides the name
        before the check, if anything (an HMAC of the password: see the known pairs).

        :raises LoginThrottledError: the address or the user has no failed login left (the module docstring's
            rules); counted in ``throttled_counts``.
        """
        attempt = self._decide(mechanism, address, user, secret)
        now = self._clock()
        if attempt.took_address:
            self._addresses.get(attempt.address, now).tokens -= 1.0
        if attempt.took_user:
            self._users.get(attempt.user, now).tokens -= 1.0
        return attempt

    def succeeded(self, attempt: Attempt) -> None:
        """The login succeeded: its tokens come back, and (user, address) becomes a known pair."""
        self._give_back(attempt)
        self._remember(attempt.pair)

    def remember(self, address: str, user: str | None, *, secret: bytes = b"") -> None:
        """A login checked without taking (:meth:`check` before it) succeeded: (user, address) becomes a known pair,
        as :meth:`succeeded` makes it."""
        if user is not None:
            where = self.address_key(address)
            self._remember(self._digest(b"pair", where.encode(), self._user_digest(user), secret))

    def refused(self, address: str, user: str | None = None, *, secret: bytes = b"") -> None:
        """A login checked without taking (:meth:`check` before it) was refused: a token is taken from each bucket
        :meth:`take` would have taken from, where one is left (a known pair's address bucket is not charged), and
        the address is failing for ``failure_memory_seconds``, as after :meth:`failed`. Never raises: the refusal
        stands whatever the buckets hold now."""
        now = self._clock()
        where = self.address_key(address)
        bucket = self._addresses.get(where, now)
        if user is not None:
            user_digest = self._user_digest(user)
            pair = self._digest(b"pair", where.encode(), user_digest, secret)
            users = self._users.get(user_digest, now)
            if users.tokens >= 1.0:
                users.tokens -= 1.0
            known = self._is_known(pair, now)
        else:
            known = False
        if not known and bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
        bucket.failed_at = now

    def failed(self, attempt: Attempt) -> None:
        """The login failed: its tokens stay spent, and its address is failing for ``failure_memory_seconds``."""
        now = self._clock()
        self._addresses.get(attempt.address, now).failed_at = now

    def cancelled(self, attempt: Attempt) -> None:
        """Nothing was checked after all (the derivation pool was full, the client went away): tokens come back."""
        self._give_back(attempt)

    def throttled_counts(self) -> dict[tuple[str, str], int]:
        """Logins refused so far, by (mechanism, ``BudgetKey`` value), sorted. Any thread may call it."""
        with self._lock:
            return dict(sorted(self._throttled.items()))

    def address_key(self, address: str) -> str:
        """What ``address`` is counted by (an IPv6 address: its block)."""
        return client_key(address, self._ipv6_prefix_length)

    # ------------------------------------------------------------------------------------------------ internals

    def _decide(self, mechanism: str, address: str, user: str | None, secret: bytes) -> Attempt:
        now = self._clock()
        where = self.address_key(address)
        user_digest = pair = None
        if user is not None:
            user_digest = self._user_digest(user)
            pair = self._digest(b"pair", where.encode(), user_digest, secret)
        bucket = self._addresses.get(where, now)
        known = pair is not None and self._is_known(pair, now)
        took_address = False
        if not known:
            if bucket.tokens < 1.0:
                self._refuse(
                    mechanism,
                    BudgetKey.ADDRESS,
                    f"Too many failed logins from {where}",
                    self._addresses.seconds_to_token(bucket),
                )
            took_address = True
        took_user = False
        if user_digest is not None:
            users = self._users.get(user_digest, now)
            if users.tokens >= 1.0:
                took_user = True
            else:
                failing_for = bucket.failed_at + self._failure_memory - now
                if bucket.tokens < 1.0:  # a spent address (a known pair's) is failing until its next token
                    failing_for = max(failing_for, self._addresses.seconds_to_token(bucket))
                if failing_for > 0:
                    wait = min(failing_for, self._users.seconds_to_token(users))
                    self._refuse(
                        mechanism, BudgetKey.USER, f"Too many failed logins for this user name from {where}", wait
                    )
        return Attempt(mechanism, where, user_digest, pair, took_address, took_user)

    def _refuse(self, mechanism: str, key: BudgetKey, what: str, wait: float) -> None:
        with self._lock:
            counted = (mechanism, key.value)
            self._throttled[counted] = self._throttled.get(counted, 0) + 1
        retry_after = max(1, math.ceil(wait))
        raise LoginThrottledError(f"{what}; retry after {retry_after} s", retry_after)

    def _is_known(self, pair: bytes, now: float) -> bool:
        until = self._known.get(pair)
        if until is None:
            return False
        if until <= now:
            del self._known[pair]
            return False
        return True

    def _remember(self, pair: bytes | None) -> None:
        if pair is not None and self._success_memory > 0:
            self._known[pair] = self._clock() + self._success_memory
            self._known.move_to_end(pair)
            while len(self._known) > self._max_keys:
                self._known.popitem(last=False)

    def _user_digest(self, user: str) -> bytes:
        return self._digest(b"user", user.encode("utf-8", "surrogatepass"))

    def _give_back(self, attempt: Attempt) -> None:
        now = self._clock()
        if attempt.took_address:
            self._addresses.give_back(attempt.address, now)
        if attempt.took_user:
            self._users.give_back(attempt.user, now)

    def _digest(self, *parts: bytes) -> bytes:
        """A keyed digest of ``parts``, each length-prefixed so that no two different lists of parts collide."""
        hasher = hashlib.blake2b(key=self._key, digest_size=_DIGEST_BYTES)
        for part in parts:
            hasher.update(len(part).to_bytes(8, "big"))
            hasher.update(part)
        return hasher.digest()
