"""ProtocolViolations with an injected clock: a violation is charged to the logged-in principal (its logins refused
at once, from every address) or, before login and for User:ANONYMOUS, to the address (IPv6: its block), refused only
past its allowance in a window; refusals double in a row up to the maximum, and a clean window forgets."""

from __future__ import annotations

import pytest

from kafkaguard.protocol.violations import ProtocolViolations, ViolationPolicy


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def ledger(**policy: float) -> tuple[ProtocolViolations, Clock]:
    clock = Clock()
    return ProtocolViolations(ViolationPolicy(**policy), clock=clock), clock  # type: ignore[arg-type]


def test_one_bad_frame_a_second_from_an_address_is_never_refused():
    """The neighbour case: 10 per 5 s refills two a second, one a second takes one."""
    violations, clock = ledger()
    for _ in range(600):
        charge = violations.charge("10.0.0.7", None)
        assert charge is not None
        assert charge.refused_seconds is None
        assert violations.address_refusal("10.0.0.7") is None
        clock.now += 1.0


def test_a_flood_from_an_address_is_refused_after_its_allowance_and_ever_longer():
    violations, clock = ledger(per_address=10, window_seconds=5.0, penalty_seconds=1.0, max_penalty_seconds=30.0)
    refused = [violations.charge("10.0.0.7", None) for _ in range(11)]
    assert [c is not None and c.refused_seconds for c in refused] == [None] * 10 + [1.0]
    detail = violations.address_refusal("10.0.0.7")
    assert detail is not None
    assert "more than 10 time(s) within 5 s" in detail
    assert "refused for 1.0 s more" in detail
    assert violations.address_refusal("10.0.0.8") is None  # only that address
    clock.now += 0.99
    assert violations.address_refusal("10.0.0.7") is not None
    clock.now += 0.02
    assert violations.address_refusal("10.0.0.7") is None


def test_refusals_in_a_row_double_up_to_the_maximum_and_the_bucket_does_not_refill_meanwhile():
    violations, clock = ledger(per_address=2, window_seconds=4.0, penalty_seconds=1.0, max_penalty_seconds=10.0)
    for _ in range(2):
        charge = violations.charge("10.0.0.7", None)
        assert charge is not None
        assert charge.refused_seconds is None
    lengths = []
    for _ in range(6):
        charge = violations.charge("10.0.0.7", None)
        assert charge is not None
        assert charge.refused_seconds is not None
        lengths.append(charge.refused_seconds)
        clock.now += charge.refused_seconds  # right after the refusal: nothing refilled during it
    assert lengths == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


def test_a_clean_window_after_a_refusal_forgets_the_offender():
    violations, clock = ledger(per_address=1, window_seconds=5.0, penalty_seconds=1.0)
    violations.charge("10.0.0.7", None)
    second = violations.charge("10.0.0.7", None)
    assert second is not None
    assert (second.refused_seconds, second.strikes) == (1.0, 1)
    clock.now += 1.0 + 4.9  # the refusal, then not quite a window: not quite one token back
    third = violations.charge("10.0.0.7", None)
    assert third is not None
    assert (third.refused_seconds, third.strikes) == (2.0, 2)  # still in a row
    clock.now += 2.0 + 5.0
    assert violations.tracked == 1
    fresh = violations.charge("10.0.0.7", None)
    assert fresh is not None
    assert fresh.strikes == 0  # forgotten: a full bucket again
    again = violations.charge("10.0.0.7", None)
    assert again is not None
    assert (again.refused_seconds, again.strikes) == (1.0, 1)


def test_a_logged_in_violation_refuses_the_principals_logins_at_once_and_not_its_address():
    violations, clock = ledger()
    charge = violations.charge("10.0.0.7", "User:bob")
    assert charge is not None
    assert (charge.offender, charge.principal, charge.refused_seconds) == ("User:bob", True, 1.0)
    refusal = violations.login_refusal("User:bob")
    assert refusal is not None
    assert refusal.startswith("User:bob may not log in for 1.0 s more")
    assert "protocol_violation_penalty_seconds" in refusal
    assert violations.login_refusal("User:alice") is None  # bob's neighbours are other users
    assert violations.address_refusal("10.0.0.7") is None  # and its address is not refused
    clock.now += 1.0
    assert violations.login_refusal("User:bob") is None
    again = violations.charge("10.0.0.9", "User:bob")  # from any address: the principal's count
    assert again is not None
    assert again.refused_seconds == 2.0


def test_anonymous_is_charged_to_its_address():
    """Every client of a PLAINTEXT listener is User:ANONYMOUS: charging it would refuse them all."""
    violations, _clock = ledger(per_address=0)
    charge = violations.charge("10.0.0.7", "User:ANONYMOUS")
    assert charge is not None
    assert (charge.offender, charge.principal) == ("10.0.0.7", False)
    assert violations.login_refusal("User:ANONYMOUS") is None
    assert violations.address_refusal("10.0.0.7") is not None


def test_ipv6_violations_count_per_block():
    violations, _clock = ledger(per_address=1)
    violations.charge("2001:db8:0:1::a", None)
    charge = violations.charge("2001:db8:0:1::b", None)  # another address, the same /64
    assert charge is not None
    assert (charge.offender, charge.refused_seconds) == ("2001:db8:0:1::/64", 1.0)
    detail = violations.address_refusal("2001:db8:0:1::ffff")
    assert detail is not None
    assert "block 2001:db8:0:1::/64" in detail
    assert violations.address_refusal("2001:db8:0:2::a") is None


def test_off_charges_nothing():
    violations, _clock = ledger(penalty_seconds=0.0)
    assert violations.charge("10.0.0.7", None) is None
    assert violations.charge("10.0.0.7", "User:bob") is None
    assert violations.tracked == 0


@pytest.mark.parametrize("maximum", [0.0, 0.5])
def test_a_maximum_below_the_first_refusal_means_the_first_refusal(maximum: float):
    policy = ViolationPolicy(penalty_seconds=1.0, max_penalty_seconds=maximum)
    assert [policy.refusal_seconds(n) for n in (1, 2, 50, 10_000)] == [1.0] * 4


def test_offenders_forgotten_are_swept_when_there_are_many():
    violations, clock = ledger(per_address=1, window_seconds=1.0)
    for n in range(6000):
        violations.charge(f"10.{n // 65536}.{n // 256 % 256}.{n % 256}", None)
    assert violations.tracked == 6000
    clock.now += 2.0
    violations.charge("192.168.0.1", None)
    assert violations.tracked == 1
