"""Protocol violations: who is refused after a connection sent bytes no Kafka client sends (a dishonest length, a
request of more than ``max_request_items`` items, an oversized frame before login), and for how long. I/O-free: the
server charges a violation when such a connection has closed (``charge``), the admission asks ``address_refusal``
when a connection is accepted, and the connection asks ``login_refusal`` when a login has proved who it is.

A violation is charged to whoever can be held to it without taking the offender's neighbours down:

* **a logged-in principal** (SASL, or a client certificate mapped to anyone but ``User:ANONYMOUS``): the principal's
  new logins are refused, from every address, at once. Its neighbours behind the same NAT are other users and log
  in as before; its own connections that are open stay open (they did nothing wrong).
* **the address otherwise** (before login, and every client of a PLAINTEXT listener, who are all ``User:ANONYMOUS``;
  an IPv6 address by its ``ipv6_prefix_length`` block, ``model.client_key``): the address may break the protocol
  ``protocol_violations_per_address`` times within ``protocol_violation_window_seconds`` (a bucket of that many,
  refilled at that many per window) before new connections from it are refused. A buggy client sending one bad frame
  a second behind a NAT or a Kubernetes node's SNAT never empties it, so its neighbours keep connecting; a flood does
  after ``protocol_violations_per_address`` violations.

Refusals **escalate**: the first lasts ``protocol_violation_penalty_seconds``, each next one twice the last, up to
``protocol_violation_penalty_max_seconds``; the bucket does not refill while its offender is refused, so after a
refusal its very next violation is refused again, for longer. An offender that stays clean for a window after its
refusal ended is forgotten (it starts again from a full bucket and the first refusal's length).

Why a penalty at all: refusing a violating request is cheap, but an attacker who reconnected, logged in and sent one
again at the creation rate from 16 addresses kept the loop busy (``bench_abuse``; see docs/benchmarks.md, "Figures from
the code"). Charged to its principal it gets one violating request in, then one after 1 s, 2 s, 4 s … whatever the
number of its addresses; before login its frames are at most ``max_unauthenticated_request_bytes`` and each address gets
its allowance, then ever rarer ones.

Worked example (defaults: 10 per 5 s, 1 s doubling up to 30 s): behind 10.0.0.7 one client sends junk once a second
and another logs in every 100 ms: the bucket loses one token a second and regains two, so nobody is refused. A flood
of junk from 10.0.0.7 has its 11th violation refused for 1 s (every client of 10.0.0.7 with it, as the flood takes
the address's creation rate anyway), its next one right after for 2 s, then 4, 8, 16, 30, 30 … s; 5 s without a
violation after the last refusal and 10.0.0.7 is forgotten. ``User:bob`` sending a 20,000-item request is refused
new logins for 1 s, from every address; ``User:alice`` on bob's address is not concerned.

Cost model: ``charge``, ``address_refusal`` and ``login_refusal`` are O(1) dict operations. Memory: one small record
per offender charged within about a window (plus its refusal); once there are more than 4096, those forgotten are
swept, at most once a second.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from kafkaguard.config.sections import LimitSettings
from kafkaguard.model import ANONYMOUS_PRINCIPAL, client_key

#: Records kept before forgotten ones are swept (at most once a second).
_SWEEP_ABOVE = 4096
#: Doublings past which a refusal is surely at its maximum (2**40 s is far beyond any setting).
_MAX_DOUBLINGS = 40


@dataclass(frozen=True, slots=True)
class ViolationPolicy:
    """The settings (``Settings.protocol_violation_*``, ``ipv6_prefix_length``)."""

    penalty_seconds: float = 1.0
    max_penalty_seconds: float = 30.0
    per_address: int = 10
    window_seconds: float = 5.0
    ipv6_prefix_length: int = 64

    @classmethod
    def from_settings(cls, limits: LimitSettings) -> ViolationPolicy:
        return cls(
            penalty_seconds=limits.protocol_violation_penalty_seconds,
            max_penalty_seconds=limits.protocol_violation_penalty_max_seconds,
            per_address=limits.protocol_violations_per_address,
            window_seconds=limits.protocol_violation_window_seconds,
            ipv6_prefix_length=limits.ipv6_prefix_length,
        )

    @property
    def enabled(self) -> bool:
        return self.penalty_seconds > 0

    def refusal_seconds(self, strikes: int) -> float:
        """How long the ``strikes``-th refusal in a row lasts."""
        doubled = self.penalty_seconds * 2.0 ** min(strikes - 1, _MAX_DOUBLINGS)
        return min(doubled, max(self.penalty_seconds, self.max_penalty_seconds))


@dataclass(frozen=True, slots=True)
class Charge:
    """What ``charge`` did: whom it charged (a principal, or an address or IPv6 block) and, when the violation was
    one too many, how long that offender is now refused, how many refusals in a row that makes, and whether it was
    refused already (a connection opened before the refusal broke the protocol during it)."""

    offender: str
    principal: bool
    refused_seconds: float | None = None
    strikes: int = 0
    already_refused: bool = False


@dataclass(slots=True)
class _Record:
    #: Violations the offender may still make without a refusal (at most the allowance).
    tokens: float
    #: When ``tokens`` was last brought up to date (after a refusal: its end, so nothing refills meanwhile).
    updated: float
    #: Refusals in a row.
    strikes: int = 0
    refused_until: float = 0.0


class _Ledger:
    """Offenders of one kind (principals, or addresses) → their records: the allowance bucket and the refusals."""

    def __init__(self, allowance: int, policy: ViolationPolicy, clock: Callable[[], float]) -> None:
        self._allowance = float(allowance)
        self._rate = allowance / policy.window_seconds
        self._policy = policy
        self._clock = clock
        self._records: dict[str, _Record] = {}
        self._last_sweep = clock()

    def __len__(self) -> int:
        return len(self._records)

    def charge(self, key: str) -> tuple[float | None, int, bool]:
        """One violation of ``key``: (how long it is now refused, None when its allowance took it; refusals in a
        row; whether it was refused already)."""
        now = self._clock()
        record = self._records.get(key)
        if record is None or self._forgotten(record, now):
            self._sweep(now)
            record = self._records[key] = _Record(self._allowance, now)
        elif now > record.updated:
            record.tokens = min(self._allowance, record.tokens + (now - record.updated) * self._rate)
            record.updated = now
        if record.tokens >= 1.0:
            record.tokens -= 1.0
            return None, record.strikes, False
        already = record.refused_until > now
        record.strikes += 1
        seconds = self._policy.refusal_seconds(record.strikes)
        record.refused_until = max(record.refused_until, now + seconds)
        record.tokens = 0.0
        record.updated = record.refused_until  # the bucket refills only once the refusal is over
        return seconds, record.strikes, already

    def refused_for(self, key: str) -> float:
        """Seconds ``key`` is still refused (0: it is not)."""
        record = self._records.get(key)
        if record is None:
            return 0.0
        return max(0.0, record.refused_until - self._clock())

    def _forgotten(self, record: _Record, now: float) -> bool:
        """Whether the record is back where a new one starts: its bucket full again, a window after any refusal."""
        missing = self._allowance - record.tokens
        if self._rate > 0:
            return now >= record.updated + missing / self._rate
        return now >= record.refused_until + self._policy.window_seconds

    def _sweep(self, now: float) -> None:
        """Forget the forgotten records when there are many, at most once a second: the table holds the offenders of
        the last window or so, not every one ever seen."""
        if len(self._records) <= _SWEEP_ABOVE or now - self._last_sweep < 1.0:
            return
        self._last_sweep = now
        self._records = {key: r for key, r in self._records.items() if not self._forgotten(r, now)}


class ProtocolViolations:
    """The violations charged in this process, to principals and to addresses (see the module docstring).

    Not thread-safe: one event loop charges and asks."""

    def __init__(self, policy: ViolationPolicy, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.policy = policy
        self._principals = _Ledger(0, policy, clock)
        self._addresses = _Ledger(policy.per_address, policy, clock)

    @property
    def tracked(self) -> int:
        """Offenders remembered (principals and addresses)."""
        return len(self._principals) + len(self._addresses)

    def offender_of(self, address: str, principal: str | None) -> tuple[str, bool]:
        """Whom a violation from ``address`` by ``principal`` (None: not logged in) is charged to: (the principal,
        True), or (the address's key, False) before login and for ``User:ANONYMOUS``."""
        if principal is not None and principal != ANONYMOUS_PRINCIPAL:
            return principal, True
        return client_key(address, self.policy.ipv6_prefix_length), False

    def charge(self, address: str, principal: str | None) -> Charge | None:
        """A connection from ``address`` logged in as ``principal`` (None: not logged in) was closed for a protocol
        violation; None when the penalty is off."""
        if not self.policy.enabled:
            return None
        offender, is_principal = self.offender_of(address, principal)
        ledger = self._principals if is_principal else self._addresses
        seconds, strikes, already = ledger.charge(offender)
        return Charge(offender, is_principal, seconds, strikes, already)

    def address_refusal(self, address: str) -> str | None:
        """Why a new connection from ``address`` is refused now (a sentence saying what to change), or None."""
        key = client_key(address, self.policy.ipv6_prefix_length)
        left = self._addresses.refused_for(key)
        if left <= 0:
            return None
        whose = f"this address's block {key}" if "/" in key else "this address"
        policy = self.policy
        return (
            f"connections from {whose} broke the Kafka protocol (bytes no Kafka client sends) more than "
            f"{policy.per_address} time(s) within {policy.window_seconds:g} s; refused for {left:.1f} s more "
            "(protocol_violations_per_address, protocol_violation_penalty_seconds)"
        )

    def login_refusal(self, principal: str) -> str | None:
        """Why ``principal``, whose login has just proved who it is, may not log in now, or None. The sentence goes
        to that client: it names nothing but its own principal and the settings."""
        if principal == ANONYMOUS_PRINCIPAL:
            return None
        left = self._principals.refused_for(principal)
        if left <= 0:
            return None
        return (
            f"{principal} may not log in for {left:.1f} s more: a connection of this principal sent bytes no Kafka "
            "client sends and was closed (protocol_violation_penalty_seconds; its open connections are not affected)"
        )
