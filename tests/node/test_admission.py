"""AdmissionControl: connections per address (with overrides by address and CIDR block), per listener and in all,
the creation rate per address (the setting, or the stored ip quotas), in the documented order; IPv6 addresses counted
per block (``ipv6_prefix_length``); addresses refused for protocol violations first."""

from __future__ import annotations

from kafkaguard.audit.records.refusals import RefusalReason
from kafkaguard.node.admission import Admission, AdmissionControl, ConnectionLimits, IpQuotaRates, Refusal
from kafkaguard.protocol.violations import ProtocolViolations, ViolationPolicy
from kafkaguard.service.quotas import QuotaAlteration, QuotaOp, QuotaService
from kafkaguard.store.memory import MemoryQuotaStore
from tests.actors import ACTOR

SASL = "SASL_PLAINTEXT://0.0.0.0:9092"
SSL = "SASL_SSL://0.0.0.0:9093"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def control(
    clock: Clock | None = None, violations: ProtocolViolations | None = None, **limits: object
) -> AdmissionControl:
    options: dict[str, object] = {"max_connections": 10_000, "per_ip": 500, "creation_rate": 1_000_000.0, **limits}
    return AdmissionControl(
        ConnectionLimits(**options),  # type: ignore[arg-type]
        violations=violations,
        clock=clock or Clock(),
    )


def reason(decision: Admission | Refusal) -> RefusalReason | None:
    return decision.reason if isinstance(decision, Refusal) else None


def test_an_address_holds_at_most_its_limit_and_others_are_unaffected():
    gate = control(per_ip=3)
    held = [gate.admit(SASL, "10.0.0.7") for _ in range(3)]
    assert all(isinstance(a, Admission) for a in held)
    refused = gate.admit(SSL, "10.0.0.7")  # every listener together
    assert reason(refused) is RefusalReason.MAX_CONNECTIONS_PER_IP
    assert isinstance(refused, Refusal)
    assert "3 connection(s) open from this address" in refused.detail
    assert "max_connections_per_ip_overrides" in refused.detail  # says what to change
    assert isinstance(gate.admit(SASL, "10.0.0.8"), Admission)
    assert (gate.open_from("10.0.0.7"), gate.open_connections) == (3, 4)
    first = held[0]
    assert isinstance(first, Admission)
    gate.release(first)
    assert isinstance(gate.admit(SASL, "10.0.0.7"), Admission)  # within its limit again


def test_overrides_by_address_and_block_the_most_specific_wins():
    gate = control(
        per_ip=2,
        per_ip_overrides={"10.0.0.0/8": 5, "10.1.0.0/16": 1, "10.1.2.3": 3, "127.0.0.2": 0, "2001:db8::/32": 4},
    )

    def admitted(address: str) -> int:
        count = 0
        while isinstance(gate.admit(SASL, address), Admission):
            count += 1
        return count

    assert admitted("10.9.9.9") == 5  # the /8
    assert admitted("10.9.9.8") == 5  # each address of the block has the limit, not the block together
    assert admitted("10.1.7.7") == 1  # the /16 is more specific than the /8
    assert admitted("10.1.2.3") == 3  # the address is the most specific of all
    assert admitted("127.0.0.2") == 0  # 0 refuses the address, as in Kafka
    assert admitted("127.0.0.1") == 2  # loopback is an address like any other
    assert admitted("2001:db8:0:0:0:0:0:9") == 4
    assert admitted("192.168.0.1") == 2


def test_a_listener_cap_leaves_other_listeners_their_connections():
    gate = control(per_listener={SSL: 2})
    assert isinstance(gate.admit(SSL, "10.0.0.1"), Admission)
    assert isinstance(gate.admit(SSL, "10.0.0.2"), Admission)
    refused = gate.admit(SSL, "10.0.0.3")
    assert reason(refused) is RefusalReason.MAX_CONNECTIONS_PER_LISTENER
    assert isinstance(gate.admit(SASL, "10.0.0.3"), Admission)
    assert (gate.open_on(SSL), gate.open_on(SASL)) == (2, 1)


def test_the_global_cap_is_checked_last():
    gate = control(max_connections=2, per_ip=1)
    assert isinstance(gate.admit(SASL, "10.0.0.1"), Admission)
    assert reason(gate.admit(SASL, "10.0.0.1")) is RefusalReason.MAX_CONNECTIONS_PER_IP
    assert isinstance(gate.admit(SASL, "10.0.0.2"), Admission)
    assert reason(gate.admit(SASL, "10.0.0.3")) is RefusalReason.MAX_CONNECTIONS


def test_creation_rate_per_address_with_one_seconds_burst():
    clock = Clock()
    gate = control(clock, creation_rate=4.0)
    decisions = [gate.admit(SASL, "10.0.0.7") for _ in range(5)]
    assert [reason(d) for d in decisions] == [None] * 4 + [RefusalReason.CONNECTION_CREATION_RATE]
    assert isinstance(gate.admit(SASL, "10.0.0.8"), Admission)  # per address
    clock.now += 0.25  # one token back
    assert isinstance(gate.admit(SASL, "10.0.0.7"), Admission)
    assert reason(gate.admit(SASL, "10.0.0.7")) is RefusalReason.CONNECTION_CREATION_RATE
    clock.now += 10  # never more than one second's worth
    assert [reason(gate.admit(SASL, "10.0.0.7")) for _ in range(5)][-2:] == [
        None,
        RefusalReason.CONNECTION_CREATION_RATE,
    ]


def test_a_rate_below_one_still_admits_one_connection_then_waits():
    clock = Clock()
    gate = control(clock, creation_rate=0.5)
    assert isinstance(gate.admit(SASL, "10.0.0.7"), Admission)
    assert reason(gate.admit(SASL, "10.0.0.7")) is RefusalReason.CONNECTION_CREATION_RATE
    clock.now += 2.0
    assert isinstance(gate.admit(SASL, "10.0.0.7"), Admission)


def test_every_attempt_takes_a_token_so_a_client_at_its_cap_retrying_in_a_loop_stays_refused():
    clock = Clock()
    gate = control(clock, per_ip=1, creation_rate=3.0)
    assert isinstance(gate.admit(SASL, "10.0.0.7"), Admission)
    reasons = [reason(gate.admit(SASL, "10.0.0.7")) for _ in range(4)]
    assert reasons == [RefusalReason.MAX_CONNECTIONS_PER_IP] * 2 + [RefusalReason.CONNECTION_CREATION_RATE] * 2


def test_stored_ip_quotas_set_the_rate_and_the_setting_applies_without_them():
    quotas = QuotaService(MemoryQuotaStore(), resolve=lambda _name: True)
    clock = Clock()
    gate = AdmissionControl(
        ConnectionLimits(max_connections=1000, per_ip=100, creation_rate=50.0),
        rate_for=IpQuotaRates(quotas),
        clock=clock,
    )

    def burst(address: str) -> int:
        count = 0
        while isinstance(gate.admit(SASL, address), Admission):
            count += 1
        return count

    assert burst("10.0.0.1") == 50  # no quota stored: the setting
    rate = "connection_creation_rate"
    results = quotas.alter(
        [
            QuotaAlteration(entity=(("ip", "10.0.0.7"),), ops=(QuotaOp(key=rate, value=2.0),)),
            QuotaAlteration(entity=(("ip", None),), ops=(QuotaOp(key=rate, value=5.0),)),
        ],
        actor=ACTOR,
    )
    assert all(result.succeeded for result in results)
    assert burst("10.0.0.7") == 2  # the address's own quota
    assert burst("10.0.0.9") == 5  # the default ip entity's
    refused = gate.admit(SASL, "10.0.0.7")
    assert isinstance(refused, Refusal)
    assert "the ip quota connection_creation_rate=2 stored for 10.0.0.7" in refused.detail
    quotas.alter([QuotaAlteration(entity=(("ip", None),), ops=(QuotaOp(key=rate, remove=True),))], actor=ACTOR)
    clock.now += 60
    assert burst("10.0.0.10") == 50  # removed: the setting again


def test_buckets_of_addresses_gone_quiet_are_forgotten():
    """A flood from many addresses leaves no table behind once they stop (the bucket of a quiet address is full, so
    forgetting it changes nothing)."""
    clock = Clock()
    gate = control(clock, creation_rate=10.0)
    for n in range(6000):
        admitted = gate.admit(SASL, f"10.{n // 65536}.{n // 256 % 256}.{n % 256}")
        assert isinstance(admitted, Admission)
        gate.release(admitted)
    assert gate.tracked_addresses == 6000
    clock.now += 2.0
    assert isinstance(gate.admit(SASL, "192.168.0.1"), Admission)
    assert gate.tracked_addresses == 1
    assert gate.open_connections == 1


def test_an_address_refused_for_protocol_violations_is_refused_first_and_only_until_its_refusal_ends():
    clock = Clock()
    violations = ProtocolViolations(ViolationPolicy(penalty_seconds=1.0, per_address=0), clock=clock)
    gate = control(clock, violations, per_ip=0)  # per_ip 0 refuses everything else: the violation is checked first
    violations.charge("10.0.0.7", None)
    refused = gate.admit(SASL, "10.0.0.7")
    assert reason(refused) is RefusalReason.PROTOCOL_VIOLATION
    assert isinstance(refused, Refusal)
    assert "protocol_violations_per_address" in refused.detail  # says what to change
    assert "protocol_violation_penalty_seconds" in refused.detail
    assert reason(gate.admit(SASL, "10.0.0.8")) is RefusalReason.MAX_CONNECTIONS_PER_IP  # only that address
    clock.now += 1.01
    assert reason(gate.admit(SASL, "10.0.0.7")) is RefusalReason.MAX_CONNECTIONS_PER_IP  # the refusal is over


def test_ipv6_addresses_of_one_block_share_its_connections_and_other_blocks_have_their_own():
    gate = control(per_ip=3)  # ipv6_prefix_length 64, the default
    held = [gate.admit(SASL, address) for address in ("2001:db8:0:1::a", "2001:db8:0:1::b", "2001:db8:0:1:ffff::1")]
    assert all(isinstance(a, Admission) for a in held)
    refused = gate.admit(SASL, "2001:db8:0:1::c")
    assert reason(refused) is RefusalReason.MAX_CONNECTIONS_PER_IP
    assert isinstance(refused, Refusal)
    assert "this address's block 2001:db8:0:1::/64" in refused.detail
    assert isinstance(gate.admit(SASL, "2001:db8:0:2::a"), Admission)  # the next /64
    assert gate.open_from("2001:db8:0:1::dead") == 3
    first = held[0]
    assert isinstance(first, Admission)
    gate.release(first)  # released under the block, whichever address it came from
    assert gate.open_from("2001:db8:0:1::b") == 2
    assert isinstance(gate.admit(SASL, "2001:db8:0:1::c"), Admission)


def test_ipv6_prefix_length_sets_the_block_and_128_counts_each_address_apart():
    wide = control(per_ip=1, ipv6_prefix_length=48)
    assert isinstance(wide.admit(SASL, "2001:db8:0:1::a"), Admission)
    assert reason(wide.admit(SASL, "2001:db8:0:2::a")) is RefusalReason.MAX_CONNECTIONS_PER_IP  # one /48
    apart = control(per_ip=1, ipv6_prefix_length=128)
    assert isinstance(apart.admit(SASL, "2001:db8:0:1::a"), Admission)
    assert isinstance(apart.admit(SASL, "2001:db8:0:1::b"), Admission)
    assert reason(apart.admit(SASL, "2001:db8:0:1::a")) is RefusalReason.MAX_CONNECTIONS_PER_IP


def test_ipv4_addresses_are_counted_one_by_one_and_an_ipv4_mapped_address_is_its_ipv4():
    gate = control(per_ip=1)
    assert isinstance(gate.admit(SASL, "10.0.0.7"), Admission)
    assert isinstance(gate.admit(SASL, "10.0.0.8"), Admission)  # a /64 means nothing for IPv4
    assert reason(gate.admit(SASL, "::ffff:10.0.0.7")) is RefusalReason.MAX_CONNECTIONS_PER_IP


def test_an_ipv6_block_shares_one_creation_bucket():
    clock = Clock()
    gate = control(clock, creation_rate=2.0)
    assert isinstance(gate.admit(SASL, "2001:db8:0:1::a"), Admission)
    assert isinstance(gate.admit(SASL, "2001:db8:0:1::b"), Admission)
    refused = gate.admit(SASL, "2001:db8:0:1::c")
    assert reason(refused) is RefusalReason.CONNECTION_CREATION_RATE  # 2^64 addresses, one bucket
    assert isinstance(refused, Refusal)
    assert "2001:db8:0:1::/64" in refused.detail
    assert isinstance(gate.admit(SASL, "2001:db8:0:2::a"), Admission)


def test_an_override_matches_the_connecting_address_and_holds_its_block_to_that_limit():
    """Overrides still name addresses and CIDR blocks; the count they limit is the block's."""
    gate = control(per_ip=1, per_ip_overrides={"2001:db8:0:1::a": 3})
    assert [reason(gate.admit(SASL, "2001:db8:0:1::a")) for _ in range(4)] == [None] * 3 + [
        RefusalReason.MAX_CONNECTIONS_PER_IP
    ]
    # another address of the block has no override: the default 1, and the block already holds 3
    assert reason(gate.admit(SASL, "2001:db8:0:1::b")) is RefusalReason.MAX_CONNECTIONS_PER_IP
