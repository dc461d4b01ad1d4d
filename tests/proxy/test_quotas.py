"""Client quotas in the proxy, without Kafka: Kafka's precedence of quota entities (``QuotaService.quota_for``),
and the byte-rate meter (``proxy.quotas``) against numbers worked out by hand from Kafka 3.9's ``Rate``,
``SampledStat`` and ``QuotaUtils.throttleTime`` (N = 11 samples of w = 1000 ms unless a test says otherwise)."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Sequence
from typing import Any, cast

import pytest

from kafkaguard.protocol.replies import NO_RESPONSE, Throttled
from kafkaguard.proxy.handlers.fetch import _MeteringWriter, _upstream_throttle
from kafkaguard.proxy.quotas import FETCH, PRODUCE, QuotaMeter, QuotaWindow, Rate, user_of
from kafkaguard.service.quotas import QuotaAlteration, QuotaOp, QuotaService
from kafkaguard.store import MemoryQuotaStore, QuotaEntity
from tests.actors import ACTOR

Pairs = Sequence[tuple[str, str | None]]


def quotas(*entries: tuple[Pairs, str, float]) -> QuotaService:
    service = QuotaService(MemoryQuotaStore())
    alterations = [QuotaAlteration(entity=tuple(e), ops=(QuotaOp(key=k, value=v),)) for e, k, v in entries]
    assert all(result.succeeded for result in service.alter(alterations, actor=ACTOR))
    return service


def remove(service: QuotaService, entity: Pairs, key: str) -> None:
    assert service.alter([QuotaAlteration(entity=tuple(entity), ops=(QuotaOp(key=key, remove=True),))], actor=ACTOR)[
        0
    ].succeeded


class Clock:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


class Fixed:
    """A quota source with one quota for everyone, matched on ``entity``."""

    def __init__(self, quota: float, entity: QuotaEntity = (("user", None),)) -> None:
        self.quota, self.entity = quota, entity

    def quota_for(self, user: str, client_id: str, key: str) -> tuple[QuotaEntity, float] | None:
        return self.entity, self.quota


def meter(quota: float = 1000.0, **options: Any) -> tuple[QuotaMeter, Clock]:
    clock = Clock()
    return QuotaMeter(Fixed(quota), clock=clock, **options), clock


def charge(m: QuotaMeter, clock: Clock, at: int, size: float, **options: Any) -> int:
    clock.now = at
    return m.record(PRODUCE, "alice", "app", size, **options)


# ---------------------------------------------------------------------------------------------------- precedence

#: Kafka's order for (user, client id), most specific first (ClientQuotaManager's class comment).
ORDER: list[Pairs] = [
    [("user", "alice"), ("client-id", "app")],
    [("user", "alice"), ("client-id", None)],
    [("user", "alice")],
    [("user", None), ("client-id", "app")],
    [("user", None), ("client-id", None)],
    [("user", None)],
    [("client-id", "app")],
    [("client-id", None)],
]


def test_quota_for_follows_kafkas_precedence_one_level_at_a_time() -> None:
    service = quotas(*[(entity, PRODUCE, float(100 + i)) for i, entity in enumerate(ORDER)])
    for i, entity in enumerate(ORDER):
        found = service.quota_for("alice", "app", PRODUCE)
        assert found is not None
        assert dict(found[0]) == dict(entity) and found[1] == 100 + i
        remove(service, entity, PRODUCE)
    assert service.quota_for("alice", "app", PRODUCE) is None


def test_quota_for_skips_entities_without_the_key_and_other_names() -> None:
    service = quotas(
        ([("user", "alice")], FETCH, 5.0),  # the other key: not a produce quota
        ([("user", "bob")], PRODUCE, 6.0),  # another user
        ([("client-id", "other")], PRODUCE, 7.0),  # another client id
        ([("client-id", None)], PRODUCE, 8.0),
    )
    assert service.quota_for("alice", "app", PRODUCE) == ((("client-id", None),), 8.0)
    assert service.quota_for("alice", "app", FETCH) == ((("user", "alice"),), 5.0)
    assert service.quota_for("bob", "other", PRODUCE) == ((("user", "bob"),), 6.0)
    assert service.quota_for("carol", "other", PRODUCE) == ((("client-id", "other"),), 7.0)


def test_a_default_entity_meters_each_name_on_its_own_and_a_named_entity_shares() -> None:
    clock = Clock()
    m = QuotaMeter(quotas(([("user", None)], PRODUCE, 1000.0), ([("client-id", None)], FETCH, 1000.0)), clock=clock)
    # /users/<default>: alice and bob each have a meter, alice's client ids share hers.
    assert m.record(PRODUCE, "alice", "a", 10_000) == 0  # 10 000 B over the 10 s floor: exactly the quota
    assert m.record(PRODUCE, "bob", "b", 10_000) == 0
    assert m.record(PRODUCE, "alice", "other", 1_000) == 1_000  # 11 000 B: 1000 ms over
    # /clients/<default> for Fetch: one meter per client id, whoever the user.
    assert m.record(FETCH, "alice", "a", 10_000) == 0
    assert m.record(FETCH, "bob", "a", 1_000) == 1_000
    assert m.record(FETCH, "bob", "b", 1_000) == 0
    assert len(m) == 4  # produce: alice, bob; fetch: a, b


def test_no_matching_quota_meters_nothing() -> None:
    m = QuotaMeter(quotas(([("user", "bob")], PRODUCE, 1.0)), clock=Clock())
    assert m.record(PRODUCE, "alice", "app", 10**9) == 0
    assert len(m) == 0
    assert m.max_fetch_bytes("alice", "app") is None


# --------------------------------------------------------------------------------------------------------- meter


def test_the_worked_example_of_the_module_docstring() -> None:
    m, clock = meter()
    # t=0: W floored from 0 to (N-1)·w = 10 000 ms; 20 000 B / 10 s = 2000 B/s; (2000-1000)/1000 × 10 000.
    assert charge(m, clock, 0, 20_000) == 10_000
    # t=10 000: the t=0 sample (last event 0) is younger than N·w = 11 000 ms: 21 000 B / 10 s; 1.1 × 10 000.
    assert charge(m, clock, 10_000, 1_000) == 11_000
    # t=21 000: both samples expired; 1000 B over the floored 10 s = 100 B/s.
    assert charge(m, clock, 21_000, 1_000) == 0


def test_a_rate_at_the_quota_is_acceptable_and_one_byte_more_is_not() -> None:
    m, clock = meter()
    assert charge(m, clock, 0, 10_000) == 0  # 1000 B/s = the bound: Quota.acceptable is value <= bound
    # 10 001 B / 10 s = 1000.1 B/s: round(0.1/1000 × 10 000) = round(1.0) = 1 ms.
    assert charge(m, clock, 0, 1) == 1


def test_beyond_the_floor_the_window_is_the_time_since_the_oldest_sample() -> None:
    m, clock = meter()
    assert charge(m, clock, 0, 1_000) == 0
    # t=10 500: W = 10 500 ms (10 full windows: no floor); 13 000 B / 10.5 s = 1238.1 B/s;
    # (1238.1 - 1000)/1000 × 10 500 = 13 000 - 10 500 = 2500 ms.
    assert charge(m, clock, 10_500, 12_000) == 2_500


def test_a_sample_is_kept_while_its_last_event_is_recent() -> None:
    """Kafka 3.9 purges a sample N·w after its *last event* and keeps an extra (N+1st) slot for it."""
    m, clock = meter(900.0)
    assert charge(m, clock, 0, 100) == 0
    assert charge(m, clock, 500, 100) == 0  # same sample: start 0, last event 500
    # t=11 200: 10 700 ms since that sample's last event (< 11 000): kept. Total 10 200 B over W = 11 200 ms:
    # 10 200 × 1000 / 900 - 11 200 = 11 333.3 - 11 200 = 133.3 → 133 ms. (Purged by its start, as Kafka before
    # 3.9 did, it would give 10 000 B over the 10 000 ms floor: 1111 ms.)
    assert charge(m, clock, 11_200, 10_000) == 133


def test_a_steady_stream_at_the_quota_reads_above_it_at_a_window_boundary() -> None:
    """1000 B every second at 1000 B/s. Up to t=9000: at most 10 000 B over the 10 000 ms floor. At t=10 000:
    11 000 B over W = 10 000 ms (10 full windows) = 1100 B/s → 11 000 - 10 000 = 1000 ms. At t=11 000 the t=0 sample
    has just expired (reset to start at 11 000), the oldest is the t=1000 one: again 11 000 B over 10 000 ms."""
    m, clock = meter()
    for second in range(10):
        assert charge(m, clock, second * 1000, 1_000) == 0
    assert charge(m, clock, 10_000, 1_000) == 1_000
    assert charge(m, clock, 11_000, 1_000) == 1_000


def test_byte_rate_throttles_are_not_capped() -> None:
    """Kafka 3.9's ClientQuotaManager uses QuotaUtils.throttleTime, not boundedThrottleTime (whose cap of one window
    is for request-percentage and connection-rate quotas): 1 MB at 1000 B/s is 1 000 000/1000 s - 10 s."""
    m, clock = meter()
    assert charge(m, clock, 0, 1_000_000) == 990_000


def test_a_refunded_charge_leaves_the_rate_as_it_was() -> None:
    m, clock = meter()
    assert charge(m, clock, 0, 9_000) == 0
    assert charge(m, clock, 0, 5_000, refund_if_throttled=True) == 4_000  # 14 000 B: 14 000 - 10 000 ms
    assert charge(m, clock, 0, 1_000) == 0  # 10 000 B: the 5000 were taken back
    assert charge(m, clock, 0, 1_000, refund_if_throttled=False) == 1_000


def test_other_windows() -> None:
    """N = 2 samples of w = 500 ms: the floor is (N-1)·w = 500 ms; samples expire N·w = 1000 ms after their last
    event."""
    m, clock = meter(1000.0, window=QuotaWindow(samples=2, window_ms=500))
    assert charge(m, clock, 0, 1_000) == 500  # 1000 B / 0.5 s = 2000 B/s: (2000-1000)/1000 × 500
    assert charge(m, clock, 1_000, 100) == 0  # the first sample expired at 1000: 100 B / 0.5 s


def test_rate_window_size_floor_and_minimum() -> None:
    rate = Rate(QuotaWindow())
    assert rate.window_size(0) == 10_000  # no sample yet: one starts now, then the floor
    rate.record(1.0, 0)
    assert rate.window_size(3_250) == 3_250 + 7_000  # 3 full windows: 7 more added
    assert Rate(QuotaWindow(samples=1, window_ms=1000)).window_size(5) == 1  # no floor with one sample: at least 1 ms


def test_meters_expire_after_an_hour_without_a_charge_and_are_bounded() -> None:
    clock = Clock()
    m = QuotaMeter(Fixed(1000.0, (("client-id", None),)), clock=clock, max_meters=3)
    for name in ("a", "b", "c"):
        m.record(PRODUCE, "u", name, 10_000)
    assert len(m) == 3
    m.record(PRODUCE, "u", "a", 0)  # "a" is now the most recently used
    m.record(PRODUCE, "u", "d", 0)  # over the bound: "b", the least recently used, goes
    assert len(m) == 3
    assert m.record(PRODUCE, "u", "a", 1_000) == 1_000  # a's history is kept
    assert m.record(PRODUCE, "u", "b", 10_000) == 0  # b starts again from zero
    clock.now = 3_600_000  # exactly an hour: kept (Sensor.hasExpired is strictly more than the expiration)
    m.record(PRODUCE, "u", "d", 0)
    assert len(m) == 3
    clock.now = 3_600_001
    m.record(PRODUCE, "u", "d", 0)
    assert len(m) == 1


def test_max_fetch_bytes_is_what_the_quota_allows_in_one_go() -> None:
    m = QuotaMeter(quotas(([("user", "alice")], FETCH, 100_000.0)), clock=Clock())
    assert m.max_fetch_bytes("alice", "app") == 1_000_000  # Q × (N - 1) × w
    assert m.max_fetch_bytes("bob", "app") is None


def test_user_names() -> None:
    assert user_of("User:alice") == "alice" and user_of("User:a:b") == "a:b"


def test_throttled_replies_run_on_the_meters_clock() -> None:
    clock = Clock()
    m = QuotaMeter(Fixed(100.0), clock=clock)
    assert m.throttled(NO_RESPONSE, 0) is NO_RESPONSE
    clock.now = 5_000
    throttled = m.throttled(NO_RESPONSE, 1500)
    assert isinstance(throttled, Throttled) and throttled.reply is NO_RESPONSE
    assert throttled.mute_until_ms == 6_500
    clock.now = 6_000
    assert throttled.mute_left_ms() == 500
    clock.now = 7_000
    assert throttled.mute_left_ms() == -500


# --------------------------------------------------------------------------------------------- relayed answers


class Sink:
    def __init__(self) -> None:
        self.data = bytearray()
        self.drains = 0

    def write(self, data: bytes) -> None:
        self.data += data

    async def drain(self) -> None:
        self.drains += 1


def frame(throttle_ms: int, body: bytes, *, flexible: bool) -> bytes:
    payload = struct.pack(">i", 7) + (b"\0" if flexible else b"") + struct.pack(">i", throttle_ms) + body
    return struct.pack(">i", len(payload)) + payload


@pytest.mark.parametrize("flexible", [False, True])
@pytest.mark.parametrize("cuts", [(8,), (1, 2, 3, 9, 13), (2,), (40,)])
@pytest.mark.parametrize("throttle", [0, 250])
def test_the_metering_writer_passes_or_drops_a_relayed_answer(
    flexible: bool, cuts: tuple[int, ...], throttle: int
) -> None:
    data = frame(30, b"records" * 5, flexible=flexible)
    sizes: list[int] = []

    def record(size: int) -> int:
        sizes.append(size)
        return throttle

    sink = Sink()
    writer = _MeteringWriter(cast(asyncio.StreamWriter, sink), record, 1 if flexible else 0)
    start = 0
    for cut in (*cuts, len(data)):  # written in pieces cut anywhere, as the relay's reads come
        writer.write(data[start:cut])
        asyncio.run(writer.drain())
        start = cut
    assert sizes == [len(data) - 4]  # charged once, the frame's size
    assert writer.throttle_ms == throttle
    if throttle:
        assert sink.data == b"" and sink.drains == 0
        assert writer.upstream_throttle_ms() == 30
    else:
        assert bytes(sink.data) == data


def test_upstream_throttle_needs_an_empty_tag_section() -> None:
    payload = frame(9, b"", flexible=True)[4:]
    assert _upstream_throttle(payload, 1) == 9
    assert _upstream_throttle(payload[:6], 1) is None
    assert _upstream_throttle(b"\0\0\0\7\1" + payload[5:], 1) is None


# ------------------------------------------------------------------------------------- decoded and local answers


class FakeScope:
    def __init__(self, version: int) -> None:
        self.api_version, self.correlation_id = version, 5


@pytest.mark.parametrize("version", [4, 11, 12])
def test_a_fetch_over_the_quota_gets_kafkas_empty_throttled_answer(version: int) -> None:
    from datetime import timedelta

    from kafkaguard.authorizer.requests import ApiKey
    from kafkaguard.protocol.codec import encode_response
    from kafkaguard.proxy.handlers.fetch import _answer, _Charge
    from kafkaguard.proxy.refusals import TOPIC_DENIED
    from kafkaguard.proxy.scope import Forwarded, ProxyScope

    clock = Clock()
    m = QuotaMeter(Fixed(100.0), clock=clock)
    scope = cast(ProxyScope, FakeScope(version))
    charge = _Charge(scope, m, "alice", "app")
    flexible = version >= 12
    payload = frame(40, b"r" * (1000 - 8 - flexible), flexible=flexible)[4:]
    assert len(payload) == 1000  # charged as Kafka's FetchResponse.sizeOf: 4 + the body = 1000 (999 when flexible)
    charged = 1000 - flexible
    assert charge.forwarded(Forwarded(scope, payload)) is None  # at most 1000 B over the 10 s floor: 100 B/s
    throttled = charge.forwarded(Forwarded(scope, payload))
    assert isinstance(throttled, Throttled)
    # 2 × charged over 10 s: (2·charged/10 - 100) / 100 × 10 000 = 20·charged - 10 000 ms (10 000, or 9 980 when
    # flexible); the upstream's 40 ms is less.
    assert cast(Any, throttled.reply).throttle_time == timedelta(milliseconds=20 * charged - 10_000)
    assert cast(Any, throttled.reply).responses == () and getattr(throttled.reply, "session_id", 0) == 0
    # refunded: the same answer again throttles the same (one answer charged before it, not two)
    again = charge.forwarded(Forwarded(scope, payload))
    assert (
        isinstance(again, Throttled)
        and cast(Any, again.reply).throttle_time == cast(Any, throttled.reply).throttle_time
    )
    # the proxy's own answer (every topic refused) is charged its size, Kafka's way
    local = _answer(scope, (), TOPIC_DENIED)
    size = len(encode_response(ApiKey.FETCH, version, 5, local)) - 4 - (5 if flexible else 4) + 4
    tight = _Charge(scope, QuotaMeter(Fixed(1.0), clock=clock), "alice", "app")
    throttled = tight.local(local)
    assert isinstance(throttled, Throttled)  # size B over 10 s at 1 B/s: (size/10 - 1) × 10 000 ms
    assert cast(Any, throttled.reply).throttle_time == timedelta(milliseconds=1000 * size - 10_000)


def test_a_throttled_produce_answer_keeps_the_larger_throttle() -> None:
    from datetime import timedelta

    from kafkaguard.authorizer.requests import ApiKey
    from kafkaguard.protocol.build import build
    from kafkaguard.protocol.codec import response_schema
    from kafkaguard.proxy.handlers.produce import _with_throttle

    answer = build(response_schema(ApiKey.PRODUCE, 9), responses=(), throttle_time=timedelta(milliseconds=300))
    assert _with_throttle(answer, 0) is answer
    assert _with_throttle(answer, 200).throttle_time == timedelta(milliseconds=300)
    assert _with_throttle(answer, 700).throttle_time == timedelta(milliseconds=700)
