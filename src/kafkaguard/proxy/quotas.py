"""Client byte-rate quotas in the proxy, metered as Kafka 3.9's ``ClientQuotaManager`` meters them.

I/O-free and clock-injected: the handlers (``handlers.produce``, ``handlers.fetch``) charge bytes and get a throttle
time; the connection (``connection.ProxyConnection``) sends the response at once with that ``throttle_time_ms`` and
then mutes the client (reads nothing more from it) until the throttle ends, as KIP-219's broker does.

Which quota, and whose meter. ``QuotaService.quota_for`` picks the quota (Kafka's precedence: the first of
/users/<user>/clients/<client-id> … /clients/<default> that has the key). One meter (Kafka's sensor) is shared by
everything that matches the same entity *shape*, as Kafka's metric tags decide (``DefaultQuotaCallback``): a match
on an entity with a user and a client id meters per (user, client id), on a user entity per user, on a client-id
entity per client id, default entities included (``/users/<default>`` gives each user its own meter, not one shared
by all users). Produce and Fetch meter separately (``producer_byte_rate``, ``consumer_byte_rate``). A client that no
quota matches is not metered at all (Kafka meters it against an unlimited bound, which never throttles).

The meter is Kafka's ``Rate`` over a ``WindowedSum`` (``SampledStat``), with the broker's defaults
``quota.window.num`` N = 11 samples of ``quota.window.size.seconds`` w = 1 s:

* a sample is (start, last event, sum); a record adds to the current sample, or first advances to the next of
  N + 1 slots (the extra one holds a sample overlapping the window) once the current one is w old, resetting it;
* before measuring, a sample whose last event is N·w old or more is reset to empty at "now";
* rate = sum of the samples / W, with W = now − the oldest sample's start, raised to at least (N − 1)·w plus
  whatever has passed of the current window when fewer than N − 1 full windows have passed (``Rate.windowSize``),
  and at least 1 ms;
* a record that leaves the rate above the quota Q is a violation; the throttle is ``QuotaUtils.throttleTime``:
  round((rate − Q) / Q × W) ms, the delay that brings rate·W/(W + X) back to Q. Kafka 3.9 does not cap it for
  byte rates (``boundedThrottleTime``, capped at one window, is for request-percentage and connection quotas only).

Worked example (N = 11, w = 1000 ms, Q = 1000 B/s), a new meter:

* t = 0: 20 000 B. W = 0 ms elapsed, raised to 10 full windows = 10 000 ms; rate = 20 000 / 10 s = 2000 B/s;
  throttle = (2000 − 1000) / 1000 × 10 000 = 10 000 ms. The client is muted until t = 10 000;
* t = 10 000: 1000 B. The first sample is complete, a second starts at 10 000; the first (last event at 0) is
  10 000 ms old, under N·w = 11 000, so it stays: W = 10 000 ms (10 full windows, no floor), rate = 21 000 / 10 s =
  2100 B/s, throttle = 1.1 × 10 000 = 11 000 ms (the floor made the first throttle short: Kafka's behaviour);
* t = 21 000: 1000 B. Both earlier samples are 11 000 ms past their last event: reset. Sum 1000 B, W floored to
  10 000 ms: 100 B/s, within the quota: no throttle.

Fetch (``KafkaApis.handleFetchRequest``): the response size is charged; when that throttles, the charge is taken
back and the client gets an empty response carrying the throttle time. Kafka also caps a consumer's fetch max_bytes
at Q·(N − 1)·w (``getMaxValueInQuotaWindow``), the most it could fetch at once without a certain throttle.

Cost: a charge is at most 8 snapshot probes (the precedence), one dict probe for the meter and O(N) work over its
N + 1 samples; nothing grows with the number of clients. Memory: one meter (N + 1 samples of three numbers) per
distinct metered (user, client id) shape that charged within the last hour; as Kafka expires a quota sensor after
3600 s without a record, the meters are kept in last-use order and the expired ones are dropped from the front at
each charge (amortized O(1)); ``max_meters`` bounds them even under a flood of client ids, dropping the least
recently used (which forgets that client's recent rate: it starts again from zero).
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Protocol

from kafkaguard.protocol.replies import NoResponse, Reply, Response, Throttled
from kafkaguard.store import QuotaEntity

PRODUCE: Final = "producer_byte_rate"
FETCH: Final = "consumer_byte_rate"

#: Kafka's broker defaults: ``quota.window.num`` and ``quota.window.size.seconds`` (in ms).
QUOTA_WINDOW_NUM: Final = 11
QUOTA_WINDOW_SIZE_MS: Final = 1000
#: ``ClientQuotaManager.InactiveSensorExpirationTimeSeconds``, in ms.
INACTIVE_EXPIRATION_MS: Final = 3600 * 1000
#: The most meters kept at once (see the module docstring).
MAX_METERS: Final = 100_000

_START, _LAST, _VALUE = 0, 1, 2


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class QuotaSource(Protocol):
    """Where quotas come from (``service.quotas.QuotaService``)."""

    def quota_for(self, user: str, client_id: str, key: str) -> tuple[QuotaEntity, float] | None: ...


@dataclass(frozen=True, slots=True)
class QuotaWindow:
    """Kafka's quota ``MetricConfig``: ``samples`` windows of ``window_ms`` each."""

    samples: int = QUOTA_WINDOW_NUM
    window_ms: int = QUOTA_WINDOW_SIZE_MS


class Rate:
    """Kafka's ``Rate`` over a ``WindowedSum`` (see the module docstring), in bytes per second. Times are ms."""

    __slots__ = ("_current", "_samples", "_window", "last_record_ms")

    def __init__(self, window: QuotaWindow) -> None:
        self._window = window
        self._samples: list[list[float]] = []  # [start, last event, sum]
        self._current = 0
        self.last_record_ms = 0

    def record(self, value: float, now: int) -> None:
        """``SampledStat.record``: add ``value`` to the current sample, advancing first if it is complete."""
        self.last_record_ms = now
        sample = self._current_sample(now)
        if now - sample[_START] >= self._window.window_ms:
            self._current = (self._current + 1) % (self._window.samples + 1)
            if self._current >= len(self._samples):
                sample = [now, now, 0.0]
                self._samples.append(sample)
            else:
                sample = self._samples[self._current]
                sample[:] = (now, now, 0.0)
        sample[_VALUE] += value
        sample[_LAST] = now

    def measure(self, now: int) -> float:
        """``Rate.measure``: the total over the retained samples per second of ``window_size``."""
        self._purge(now)
        total = sum(sample[_VALUE] for sample in self._samples)
        return total / (self.window_size(now) / 1000.0)

    def window_size(self, now: int) -> int:
        """``Rate.windowSize``: time since the oldest retained sample began, at least N − 1 windows, at least 1."""
        self._purge(now)
        if not self._samples:
            self._samples.append([now, now, 0.0])
        window = self._window
        elapsed = now - int(min(sample[_START] for sample in self._samples))
        full = elapsed // window.window_ms
        if full < window.samples - 1:
            elapsed += (window.samples - 1 - full) * window.window_ms
        return max(elapsed, 1)

    def throttle_ms(self, quota: float, now: int) -> int:
        """0 if the rate is within ``quota`` (``Quota.acceptable``: rate ≤ bound), else ``QuotaUtils.throttleTime``:
        round((rate − quota) / quota × window size), in ms."""
        rate = self.measure(now)
        if rate <= quota:
            return 0
        return int(min(math.floor((rate - quota) / quota * self.window_size(now) + 0.5), 2**31 - 1))

    def _current_sample(self, now: int) -> list[float]:
        if not self._samples:
            self._samples.append([now, now, 0.0])
        return self._samples[self._current]

    def _purge(self, now: int) -> None:
        """``purgeObsoleteSamples``: reset each sample whose last event is N windows old or more."""
        expire_age = self._window.samples * self._window.window_ms
        for sample in self._samples:
            if now - sample[_LAST] >= expire_age:
                sample[:] = (now, now, 0.0)


def meter_key(quota_key: str, entity: QuotaEntity, user: str, client_id: str) -> tuple[str, str, str]:
    """The meter a charge goes to: Kafka's quota metric tags (user, client-id) for the matched entity's types, with
    the client's own names (so a default entity meters each user or client id separately)."""
    types = {entity_type for entity_type, _ in entity}
    return quota_key, user if "user" in types else "", client_id if "client-id" in types else ""


class QuotaMeter:
    """The byte-rate meters of one proxy process, for ``quotas`` (see the module docstring). Not thread-safe: use
    it from the proxy's event loop."""

    def __init__(
        self,
        quotas: QuotaSource,
        *,
        window: QuotaWindow = QuotaWindow(),
        clock: Callable[[], int] = monotonic_ms,
        inactive_expiration_ms: int = INACTIVE_EXPIRATION_MS,
        max_meters: int = MAX_METERS,
    ) -> None:
        self._quotas = quotas
        self.window = window
        self.clock = clock
        self._expiration_ms = inactive_expiration_ms
        self._max_meters = max_meters
        self._meters: OrderedDict[tuple[str, str, str], Rate] = OrderedDict()

    def __len__(self) -> int:
        return len(self._meters)

    def quota(self, quota_key: str, user: str, client_id: str) -> float | None:
        """The quota that applies, or None (unlimited)."""
        found = self._quotas.quota_for(user, client_id, quota_key)
        return None if found is None else found[1]

    def max_fetch_bytes(self, user: str, client_id: str) -> int | None:
        """Kafka's ``getMaxValueInQuotaWindow`` for Fetch: Q × (N − 1) × w, the most a fetch may ask for without a
        certain throttle; None when no consumer quota applies."""
        quota = self.quota(FETCH, user, client_id)
        if quota is None:
            return None
        limit = quota * (self.window.samples - 1) * self.window.window_ms / 1000.0
        return int(min(limit, 2**31 - 1))  # Scala's Double.toInt saturates

    def record(
        self, quota_key: str, user: str, client_id: str, value: float, *, refund_if_throttled: bool = False
    ) -> int:
        """Charge ``value`` bytes; the throttle time in ms (0: within the quota, or no quota applies).
        ``refund_if_throttled`` takes the charge back when it throttles (Kafka's ``unrecordQuotaSensor`` for a
        Fetch answered empty)."""
        found = self._quotas.quota_for(user, client_id, quota_key)
        if found is None:
            return 0
        entity, quota = found
        now = self.clock()
        rate = self._meter(meter_key(quota_key, entity, user, client_id), now)
        rate.record(value, now)
        throttle = rate.throttle_ms(quota, now)
        if throttle and refund_if_throttled:
            rate.record(-value, now)
        return throttle

    def throttled(self, reply: Response | NoResponse, throttle_ms: int) -> Reply:
        """``reply`` muted for ``throttle_ms`` from now on this meter's clock (a ``Throttled`` reply, KIP-219), or
        ``reply`` itself when there is no throttle."""
        if throttle_ms <= 0:
            return reply
        return Throttled(reply, self.clock() + throttle_ms, self.clock)

    def _meter(self, key: tuple[str, str, str], now: int) -> Rate:
        meters = self._meters
        rate = meters.get(key)
        if rate is None:
            rate = meters[key] = Rate(self.window)
        else:
            meters.move_to_end(key)
        rate.last_record_ms = now
        while meters:  # least recently used first: stop at the first one still alive
            oldest_key, oldest = next(iter(meters.items()))
            if now - oldest.last_record_ms <= self._expiration_ms and len(meters) <= self._max_meters:
                break
            del meters[oldest_key]
        return rate


def user_of(principal: str) -> str:
    """The user name of a ``User:name`` principal (Kafka's ``principal.getName``)."""
    return principal.partition(":")[2]
