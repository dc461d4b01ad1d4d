"""Connection admission: whether a client may open one more connection, decided when its TCP connection is accepted,
before a byte of it is read or a TLS handshake begins (``accept``), as Kafka's ``ConnectionQuotas`` decides in its
acceptor. I/O-free: the server asks ``admit`` and, when the connection ends, ``release``.

The limits, checked in this order; the first one exceeded refuses the connection (it is closed at once):

1. ``max_connection_creation_rate_per_ip`` (KIP-612): a token bucket per address, refilled at the address's rate
   and holding one second's worth (at least one token). The rate is the address's stored ``connection_creation_rate``
   ip quota, else the default ip entity's (``kafka-configs --entity-type ips --entity-default``), else the setting.
   Every attempt takes a token, admitted or not: a client that retries in a tight loop stays refused.
2. ``max_connections_per_ip`` (Kafka's ``max.connections.per.ip``): connections open from the address, all listeners
   together, the proxy's per-broker ports included; ``max_connections_per_ip_overrides`` sets another limit for an
   address, or for each address of a CIDR block (the most specific entry holding the address wins).
3. ``max_connections_per_listener`` (Kafka's ``listener.name.X.max.connections``): connections open on a configured
   listener (for the proxy, with that listener's per-broker ports).
4. ``max_connections``: connections open in the process.

Loopback is an address like any other: it is exempt only through an override. **IPv6 clients are counted per
block** of ``ipv6_prefix_length`` bits (default /64, ``model.client_key``): one host holds a whole /64, so counting
its addresses apart would give it 2^64 budgets. The open connections, the creation bucket and the violation refusal
are the block's; an override (and a stored ip quota's rate) still matches the connecting address itself, by address
or CIDR block, and sets the limit its block is held to. IPv4 addresses are counted one by one.

Before all of them, an address refused for protocol violations (``violations.ProtocolViolations``: bytes no Kafka
client sends, more than ``protocol_violations_per_address`` times in a window before login) is refused.

Worked example (per ip 500, override ``10.1.0.0/16:50``, rate 100/s): 10.0.0.7 opens 600 idle connections in 2 s.
The first 500 are admitted (its bucket holds 100 tokens and regains 100 a second, so the burst is spread over the
first second and a half); the next 100 find 500 open and are refused ``max_connections_per_ip``. 10.1.2.3 may hold
50 (the /16 override), 10.0.0.8 its own 500: one address cannot take the others' connections. 2001:db8:0:1::a
and 2001:db8:0:1::b hold 500 together (both are 2001:db8:0:1::/64); 2001:db8:0:2::a has its own 500.

Cost model: ``admit`` is O(1) dict operations plus one probe per distinct prefix length among the overrides (as the
authorizer's index probes prefixes: ``overrides`` of any size cost a handful of lookups), and ``client_key`` (cached);
``release`` O(1). Memory: one entry per address (IPv6: per block) with a connection open, plus a bucket per address
that connected in the last second or so (buckets that have refilled are swept once a second when there are many),
whatever the number of attempts.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kafkaguard.audit.records.refusals import RefusalReason
from kafkaguard.config.sections import LimitSettings
from kafkaguard.model import client_key, java_host, parse_address, parse_cidr
from kafkaguard.protocol.violations import ProtocolViolations
from kafkaguard.service.quotas import IP, QuotaService

#: Buckets kept before refilled ones are swept (at most once a second).
_SWEEP_ABOVE = 4096
_RATE_KEY = "connection_creation_rate"


@dataclass(frozen=True, slots=True)
class Admission:
    """A connection let in: what ``release`` gives back when it ends."""

    listener: str
    address: str


@dataclass(frozen=True, slots=True)
class Refusal:
    """A connection refused: the limit it hit and a sentence saying which and what to change."""

    reason: RefusalReason
    detail: str


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """The limits, from the settings (``Settings.max_connections*``, ``max_connection_creation_rate_per_ip``)."""

    max_connections: int
    per_ip: int
    #: Address or CIDR block (as ``Settings.max_connections_per_ip_overrides`` keeps them) → limit.
    per_ip_overrides: Mapping[str, int] = field(default_factory=dict)
    #: Listener (as configured) → limit; listeners not named have none of their own.
    per_listener: Mapping[str, int] = field(default_factory=dict)
    creation_rate: float = 100.0
    #: IPv6 clients are counted per block of this many bits (``Settings.ipv6_prefix_length``; 128: per address).
    ipv6_prefix_length: int = 64

    @classmethod
    def from_settings(cls, limits: LimitSettings) -> ConnectionLimits:
        return cls(
            max_connections=limits.max_connections,
            per_ip=limits.max_connections_per_ip,
            per_ip_overrides=dict(limits.max_connections_per_ip_overrides),
            per_listener=dict(limits.max_connections_per_listener),
            creation_rate=limits.max_connection_creation_rate_per_ip,
            ipv6_prefix_length=limits.ipv6_prefix_length,
        )


class _Overrides:
    """Per-address limits by address or CIDR block; ``limit_of`` finds the most specific entry holding an address.

    Indexed by (IP version, prefix length) → {network bits: limit}, the lengths probed longest first: a bare address
    is its /32 or /128.
    """

    def __init__(self, entries: Mapping[str, int]) -> None:
        self._blocks: dict[tuple[int, int], dict[int, int]] = {}
        for key, limit in entries.items():
            block = parse_cidr(key if "/" in key else f"{key}/{128 if ':' in key else 32}")
            if block is None:  # Settings validated every key; an unparseable one would match nothing anyway
                continue
            self._blocks.setdefault((block.version, block.length), {})[block.network] = limit
        self._lengths = {
            version: sorted((length for v, length in self._blocks if v == version), reverse=True) for version in (4, 6)
        }

    def limit_of(self, address: str) -> int | None:
        parsed = parse_address(address)
        if parsed is None:
            return None
        version, value = parsed
        bits = 32 if version == 4 else 128
        for length in self._lengths[version]:
            limit = self._blocks[(version, length)].get(value >> (bits - length))
            if limit is not None:
                return limit
        return None


@dataclass(slots=True)
class _Bucket:
    tokens: float
    updated: float
    #: When the bucket is full again if nothing is taken (then it may be forgotten).
    full_at: float


class IpQuotaRates:
    """``connection_creation_rate`` from the stored ip quotas (KIP-546 entity ``ip``): the address's own entity,
    else the default ip entity; None when neither has one. Re-indexed when the quota snapshot's version moves (one
    int compared per call otherwise). An entity named by host name matches no client: nothing is resolved."""

    def __init__(self, quotas: QuotaService) -> None:
        self._quotas = quotas
        self._version: int | None = None
        self._by_address: dict[str, float] = {}
        self._default: float | None = None

    def __call__(self, address: str) -> tuple[float, str] | None:
        if self._quotas.version != self._version:
            self._reindex()
        rate = self._by_address.get(address)
        if rate is not None:
            return rate, f"the ip quota connection_creation_rate={rate:g} stored for {address}"
        if self._default is not None:
            return self._default, f"the default ip quota connection_creation_rate={self._default:g}"
        return None

    def _reindex(self) -> None:
        version = self._quotas.version
        by_address: dict[str, float] = {}
        default: float | None = None
        for record in self._quotas.quotas():
            names = dict(record.entity)
            rate = record.values.get(_RATE_KEY)
            if rate is None or set(names) != {IP}:
                continue
            name = names[IP]
            if name is None:
                default = rate
                continue
            parsed = parse_address(name)
            if parsed is not None:  # the key is the address as the server names a client (Java's form)
                by_address[java_host(name)] = rate
        self._by_address, self._default, self._version = by_address, default, version


class AdmissionControl:
    """The connections open per address (IPv6: per block), per listener and in all, and each address's creation
    bucket; ``violations``: the addresses refused for protocol violations (None: none are).

    Not thread-safe: one event loop admits and releases."""

    def __init__(
        self,
        limits: ConnectionLimits,
        *,
        rate_for: Callable[[str], tuple[float, str] | None] = lambda _address: None,
        violations: ProtocolViolations | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limits = limits
        self.violations = violations
        self._overrides = _Overrides(limits.per_ip_overrides)
        self._rate_for = rate_for
        self._clock = clock
        #: Keyed by ``client_key``: an IPv4 address, or an IPv6 address's block.
        self._per_ip: dict[str, int] = {}
        self._per_listener: dict[str, int] = {}
        self._total = 0
        self._buckets: dict[str, _Bucket] = {}
        self._last_sweep = clock()

    @property
    def open_connections(self) -> int:
        return self._total

    def reconfigure(self, limits: ConnectionLimits) -> None:
        """New limits (a SIGHUP, ``node.live``) for the connections admitted from now on; open ones stay open, and
        each address's creation bucket is refilled at the new rate from its next connection. ``limits`` keeps the
        running ``ipv6_prefix_length`` (the open connections are counted by it)."""
        self.limits = limits
        self._overrides = _Overrides(limits.per_ip_overrides)

    def key_of(self, address: str) -> str:
        """What ``address`` is counted as: itself (IPv4), or its IPv6 block (``model.client_key``)."""
        return client_key(address, self.limits.ipv6_prefix_length)

    def open_from(self, address: str) -> int:
        """Connections open from ``address``'s key: the address, or every address of its IPv6 block."""
        return self._per_ip.get(self.key_of(address), 0)

    def open_on(self, listener: str) -> int:
        return self._per_listener.get(listener, 0)

    @property
    def tracked_addresses(self) -> int:
        """Addresses whose creation rate is being followed (those that connected in the last moments)."""
        return len(self._buckets)

    def admit(self, listener: str, address: str) -> Admission | Refusal:
        """Let a connection from ``address`` (Java's form, as ``java_host`` gives it) on ``listener`` in, counting
        it, or say which limit refuses it (nothing is counted then but the creation attempt)."""
        key = self.key_of(address)
        refusal = self._violation(address) or self._take_token(key, address) or self._check_caps(listener, key, address)
        if refusal is not None:
            return refusal
        self._per_ip[key] = self._per_ip.get(key, 0) + 1
        self._per_listener[listener] = self._per_listener.get(listener, 0) + 1
        self._total += 1
        return Admission(listener, address)

    def _violation(self, address: str) -> Refusal | None:
        if self.violations is None:
            return None
        detail = self.violations.address_refusal(address)
        return None if detail is None else Refusal(RefusalReason.PROTOCOL_VIOLATION, detail)

    def release(self, admission: Admission) -> None:
        """A connection admitted by ``admit`` has ended."""
        key = self.key_of(admission.address)
        left = self._per_ip.get(key, 0) - 1
        if left > 0:
            self._per_ip[key] = left
        else:
            self._per_ip.pop(key, None)
        self._per_listener[admission.listener] = max(0, self._per_listener.get(admission.listener, 0) - 1)
        self._total = max(0, self._total - 1)

    def _check_caps(self, listener: str, key: str, address: str) -> Refusal | None:
        limits = self.limits
        override = self._overrides.limit_of(address)
        per_ip = limits.per_ip if override is None else override
        open_here = self._per_ip.get(key, 0)
        if open_here >= per_ip:
            source = "its max_connections_per_ip_overrides entry" if override is not None else "max_connections_per_ip"
            whose = f"this address's block {key} (ipv6_prefix_length)" if "/" in key else "this address"
            return Refusal(
                RefusalReason.MAX_CONNECTIONS_PER_IP,
                f"{open_here} connection(s) open from {whose}, the limit of {per_ip} set by {source}; if this "
                "client is legitimate, list its address in max_connections_per_ip_overrides",
            )
        cap = limits.per_listener.get(listener)
        if cap is not None and self._per_listener.get(listener, 0) >= cap:
            return Refusal(
                RefusalReason.MAX_CONNECTIONS_PER_LISTENER,
                f"{cap} connection(s) open on this listener, its max_connections_per_listener",
            )
        if self._total >= limits.max_connections:
            return Refusal(
                RefusalReason.MAX_CONNECTIONS,
                f"{self._total} connection(s) open in all, max_connections",
            )
        return None

    def _take_token(self, key: str, address: str) -> Refusal | None:
        now = self._clock()
        stored = self._rate_for(address)
        rate, source = (
            stored if stored is not None else (self.limits.creation_rate, "max_connection_creation_rate_per_ip")
        )
        capacity = max(rate, 1.0)
        bucket = self._buckets.get(key)
        if bucket is None:
            self._sweep(now)
            bucket = self._buckets[key] = _Bucket(capacity, now, now)
        else:
            bucket.tokens = min(capacity, bucket.tokens + (now - bucket.updated) * rate)
            bucket.updated = now
        if bucket.tokens < 1.0:
            whose = f"this address's block {key} (ipv6_prefix_length)" if "/" in key else "this address"
            return Refusal(
                RefusalReason.CONNECTION_CREATION_RATE,
                f"more than {rate:g} new connection(s) a second from {whose}, the rate set by {source}",
            )
        bucket.tokens -= 1.0
        bucket.full_at = now + (capacity - bucket.tokens) / rate
        return None

    def _sweep(self, now: float) -> None:
        """Forget the buckets that have refilled (a new one starts full anyway), when there are many and at most
        once a second: the table holds the addresses seen in the last moments, not every address ever seen."""
        if len(self._buckets) <= _SWEEP_ABOVE or now - self._last_sweep < 1.0:
            return
        self._last_sweep = now
        self._buckets = {key: bucket for key, bucket in self._buckets.items() if bucket.full_at > now}
