"""``LoginFailureBudget``: failed logins per address and per user name, with an injected clock (issue 36 items 2, 3).

The rules under test: an empty address bucket refuses that address; an empty user bucket refuses that name only from
addresses that failed recently; a clean address is always checked (no lockout); a known (user, address) pair is exempt
from its address's bucket; successes give their tokens back; IPv6 clients count per /64; memory is bounded."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkaguard.identity.failure_budget import Attempt, LoginFailureBudget, LoginThrottledError


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def budget(clock: Clock, **settings: float) -> LoginFailureBudget:
    values: dict[str, float] = {
        "address_burst": 3,
        "address_per_minute": 6,
        "user_burst": 4,
        "user_per_minute": 2,
        "failure_memory_seconds": 600,
        "success_memory_seconds": 3600,
    } | settings
    return LoginFailureBudget(clock=clock, **values)  # type: ignore[arg-type]


def fail(budget: LoginFailureBudget, address: str, user: str | None = None, mechanism: str = "PLAIN") -> None:
    budget.failed(budget.take(mechanism, address, user))


def refused(budget: LoginFailureBudget, address: str, user: str | None = None) -> LoginThrottledError:
    with pytest.raises(LoginThrottledError) as caught:
        budget.take("PLAIN", address, user)
    return caught.value


# ------------------------------------------------------------------------------------------------ per address


def test_an_address_fails_its_burst_then_is_refused_until_its_next_token() -> None:
    clock = Clock()
    b = budget(clock)
    for number in range(3):
        fail(b, "10.0.0.1", f"name-{number}")  # other names each time: the address bucket alone
    error = refused(b, "10.0.0.1", "anyone")
    assert error.retry_after_seconds == 10  # 6 a minute: one every 10 s
    assert str(error) == "Too many failed logins from 10.0.0.1; retry after 10 s"
    assert refused(b, "10.0.0.1").retry_after_seconds == 10  # without a name too (OAUTHBEARER, SSL)
    clock.now += 9.5
    assert refused(b, "10.0.0.1").retry_after_seconds == 1
    clock.now += 0.5
    b.take("PLAIN", "10.0.0.1", "someone")  # the next token is due
    b.take("PLAIN", "10.0.0.2", "anyone")  # another address has its own budget


def test_success_gives_the_tokens_back_and_only_failures_count() -> None:
    b = budget(Clock())
    for _ in range(10):
        b.succeeded(b.take("SCRAM-SHA-256", "10.0.0.1", "alice"))
    for _ in range(3):
        fail(b, "10.0.0.1", "mallory")
    refused(b, "10.0.0.1", "mallory")


def test_cancelled_gives_back_without_marking_the_address_failing() -> None:
    b = budget(Clock(), user_burst=1)
    b.cancelled(b.take("PLAIN", "10.0.0.1", "alice"))  # the pool was full: nothing checked
    fail(b, "10.0.0.2", "alice")  # alice's one token, spent elsewhere
    b.take("PLAIN", "10.0.0.1", "alice")  # 10.0.0.1 is not failing: checked


def test_check_refuses_as_take_does_but_takes_nothing() -> None:
    b = budget(Clock(), address_burst=1)
    for _ in range(5):
        b.check("SCRAM-SHA-256", "10.0.0.1", "alice")
    fail(b, "10.0.0.1", "alice", "SCRAM-SHA-256")
    with pytest.raises(LoginThrottledError):
        b.check("SCRAM-SHA-256", "10.0.0.1", "alice")


def test_every_mechanism_draws_on_the_same_address_bucket() -> None:
    b = budget(Clock())
    fail(b, "10.0.0.1", "alice", "SCRAM-SHA-512")
    fail(b, "10.0.0.1", None, "OAUTHBEARER")
    fail(b, "10.0.0.1", None, "SSL")
    with pytest.raises(LoginThrottledError):
        b.take("console", "10.0.0.1", "bob")
    assert b.throttled_counts() == {("console", "address"): 1}


def test_ipv6_clients_count_per_64_and_ipv4_per_address() -> None:
    b = budget(Clock())
    for host in ("2001:db8:0:1::1", "2001:db8:0:1::2", "2001:db8:0:1:ffff::9"):
        fail(b, host, "x")
    error = refused(b, "2001:db8:0:1:abcd::1")
    assert "2001:db8:0:1::/64" in str(error)
    b.take("PLAIN", "2001:db8:0:2::1")  # the next /64 is another client
    b128 = budget(Clock(), ipv6_prefix_length=128)
    for _ in range(3):
        fail(b128, "2001:db8::1")
    b128.take("PLAIN", "2001:db8::2")  # /128: each address apart


# ------------------------------------------------------------------------------------------------ per user


def test_a_spent_user_budget_refuses_failing_addresses_and_checks_clean_ones() -> None:
    """Guesses against alice from many addresses: past alice's burst, addresses that failed are refused, while
    alice's owner from an address that never failed is checked (and so logs in)."""
    clock = Clock()
    b = budget(clock, address_burst=100)
    for number in range(4):
        fail(b, f"10.0.1.{number}", "alice")
    error = refused(b, "10.0.1.0", "alice")
    assert str(error) == "Too many failed logins for this user name from 10.0.1.0; retry after 30 s"  # 2 a minute
    b.take("PLAIN", "10.0.1.0", "bob")  # only alice's name is spent
    owner = b.take("PLAIN", "192.168.7.7", "alice")  # a clean address: checked
    assert not owner.took_user  # alice had no token left to take: nothing is borrowed from her next ones
    b.succeeded(owner)
    fresh = b.take("PLAIN", "10.0.1.9", "alice")  # an address new to the flood gets one check...
    b.failed(fresh)
    refused(b, "10.0.1.9", "alice")  # ...and is failing from then on
    clock.now += 30
    b.failed(b.take("PLAIN", "10.0.1.0", "alice"))  # alice's next token, 30 s later
    refused(b, "10.0.1.1", "alice")


def test_a_failing_address_stops_failing_after_the_memory() -> None:
    clock = Clock()
    b = budget(clock, address_burst=100, user_per_minute=0.001, failure_memory_seconds=60)
    for _ in range(4):
        fail(b, "10.0.2.1", "alice")
    assert refused(b, "10.0.2.1", "alice").retry_after_seconds == 60  # when the address stops failing
    clock.now += 60
    b.take("PLAIN", "10.0.2.1", "alice")


def test_names_are_kept_as_digests_so_a_long_name_costs_what_a_short_one_does() -> None:
    b = budget(Clock(), user_burst=1, address_burst=100)
    long_name = "x" * 1_000_000
    attempt = b.take("PLAIN", "10.0.3.1", long_name)
    assert attempt.user is not None and len(attempt.user) == 16
    b.failed(attempt)
    refused(b, "10.0.3.1", long_name)
    b.take("PLAIN", "10.0.3.1", long_name[:-1])  # another name


def test_unknown_and_known_names_are_budgeted_alike() -> None:
    """The budget never looks names up: it cannot answer differently for a user that exists."""
    answers = []
    for name in ("admin", "no-such-user"):
        b = budget(Clock())
        for _ in range(3):
            fail(b, "10.0.4.1", name)
        answers.append(str(refused(b, "10.0.4.1", name)))
    assert answers[0] == answers[1]


# ------------------------------------------------------------------------------------------------ known pairs


def test_a_user_that_logged_in_from_an_address_is_exempt_from_its_spent_bucket() -> None:
    """A client failing behind a NAT spends the NAT's bucket; its neighbour's established user still logs in,
    and the neighbour's failures are still bounded by its user bucket."""
    clock = Clock()
    b = budget(clock)
    b.succeeded(b.take("SCRAM-SHA-256", "10.0.5.1", "alice"))
    for _ in range(3):
        fail(b, "10.0.5.1", "broken-client")
    refused(b, "10.0.5.1", "carol")  # never logged in from here: refused
    b.succeeded(b.take("SCRAM-SHA-256", "10.0.5.1", "alice"))  # exempt
    for _ in range(4):  # alice's own failures from here spend her bucket...
        fail(b, "10.0.5.1", "alice")
    refused(b, "10.0.5.1", "alice")  # ...and past it she is refused here (the address is failing)


def test_a_known_pair_is_forgotten_after_the_success_memory() -> None:
    clock = Clock()
    b = budget(clock, address_per_minute=0.001)
    b.succeeded(b.take("SCRAM-SHA-256", "10.0.5.2", "alice"))
    for _ in range(3):
        fail(b, "10.0.5.2", "x")
    clock.now += 3599
    b.cancelled(b.take("SCRAM-SHA-256", "10.0.5.2", "alice"))  # still known
    clock.now += 1
    refused(b, "10.0.5.2", "alice")


def test_with_a_secret_only_the_same_secret_is_exempt() -> None:
    """PLAIN and the console pass an HMAC of the password: a wrong password is not exempt, so the answer tells an
    address whose bucket is spent nothing about which names logged in there."""
    b = budget(Clock())
    b.succeeded(b.take("PLAIN", "10.0.5.3", "alice", secret=b"right"))
    for _ in range(3):
        fail(b, "10.0.5.3", "x")
    with pytest.raises(LoginThrottledError):
        b.take("PLAIN", "10.0.5.3", "alice", secret=b"wrong")
    b.take("PLAIN", "10.0.5.3", "alice", secret=b"right")


def test_success_memory_zero_turns_the_exemption_off() -> None:
    b = budget(Clock(), success_memory_seconds=0)
    b.succeeded(b.take("SCRAM-SHA-256", "10.0.5.4", "alice"))
    for _ in range(3):
        fail(b, "10.0.5.4", "x")
    refused(b, "10.0.5.4", "alice")


# ------------------------------------------------------------------------------------------------ bounds, counts


def test_memory_is_bounded_least_recently_used_first_out() -> None:
    b = LoginFailureBudget(address_burst=1, user_burst=1, max_keys=50, clock=Clock())
    for number in range(500):
        b.succeeded(b.take("PLAIN", f"10.1.{number // 256}.{number % 256}", f"user-{number}"))
    assert repr(b) == "LoginFailureBudget(addresses=50, users=50, known_pairs=50)"


def test_refusals_are_counted_by_mechanism_and_bucket() -> None:
    b = budget(Clock(), address_burst=100, user_burst=1)
    fail(b, "10.2.0.1", "alice", "SCRAM-SHA-512")
    for _ in range(2):
        with pytest.raises(LoginThrottledError):
            b.check("SCRAM-SHA-512", "10.2.0.1", "alice")
    b2 = budget(Clock(), address_burst=1)
    fail(b2, "10.2.0.2", None, "OAUTHBEARER")
    with pytest.raises(LoginThrottledError):
        b2.take("OAUTHBEARER", "10.2.0.2")
    assert b.throttled_counts() == {("SCRAM-SHA-512", "user"): 2}
    assert b2.throttled_counts() == {("OAUTHBEARER", "address"): 1}


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="burst"):
        LoginFailureBudget(address_burst=0)
    with pytest.raises(ValueError, match="rate"):
        LoginFailureBudget(user_per_minute=0)


# ------------------------------------------------------------------------------------------------ properties


@dataclass(frozen=True)
class Login:
    address: int  # 0..5: addresses 0-3 are the attacker's, 4-5 never fail
    user: int  # 0..2
    right: bool  # the right password (only addresses 4-5 ever send it... and a few attacker tries)
    wait: float  # seconds before it


logins = st.lists(
    st.builds(
        Login,
        address=st.integers(0, 5),
        user=st.integers(0, 2),
        right=st.booleans(),
        wait=st.sampled_from([0.0, 0.0, 0.5, 3.0, 20.0]),
    ),
    max_size=120,
)


@given(logins)
def test_no_lockout_an_address_that_never_failed_is_always_checked(sequence: list[Login]) -> None:
    """Whatever the others do, a login from an address that has never failed (here: 4 and 5 always log in right)
    is never refused."""
    clock = Clock()
    b = budget(clock, address_burst=2, user_burst=2)
    for login in sequence:
        clock.now += login.wait
        good = login.address >= 4
        try:
            attempt = b.take("PLAIN", f"10.3.0.{login.address}", f"user-{login.user}")
        except LoginThrottledError:
            assert not good, "a correct login from an address that never failed was refused"
            continue
        if good or login.right:
            b.succeeded(attempt)
        else:
            b.failed(attempt)


@given(logins)
def test_failures_checked_against_a_user_stay_within_its_budget(sequence: list[Login]) -> None:
    """Failures checked for one name from failing addresses never exceed burst + rate × elapsed, plus one per
    address that was clean when it failed (the no-lockout rule's price); known pairs never fail here."""
    clock = Clock()
    user_burst, user_per_minute, memory = 3, 6.0, 600.0
    b = budget(clock, address_burst=1000, user_burst=user_burst, user_per_minute=user_per_minute,
               failure_memory_seconds=memory, success_memory_seconds=0)  # fmt: skip
    start = clock.now
    checked: dict[int, int] = {}
    clean_failures: dict[int, int] = {}
    last_failure: dict[int, float] = {}
    for login in sequence:
        clock.now += login.wait
        address = f"10.4.0.{login.address}"
        try:
            attempt: Attempt = b.take("SCRAM-SHA-256", address, f"user-{login.user}")
        except LoginThrottledError:
            continue
        if login.right:
            b.succeeded(attempt)
            continue
        checked[login.user] = checked.get(login.user, 0) + 1
        if clock.now - last_failure.get(login.address, -1e18) >= memory:
            clean_failures[login.user] = clean_failures.get(login.user, 0) + 1
        last_failure[login.address] = clock.now
        b.failed(attempt)
    elapsed = clock.now - start
    for user, count in checked.items():
        assert count <= user_burst + user_per_minute * elapsed / 60 + clean_failures.get(user, 0)


def test_a_check_that_holds_nothing_spends_only_by_refusals() -> None:
    """``check`` … ``refused``/``remember`` (a login the broker decides): a refusal spends what ``take`` would have
    taken and makes the address failing; a success makes a known pair; nothing is taken in between."""
    clock = Clock()
    limits = budget(clock, address_burst=2, user_burst=3)
    for _ in range(5):  # checks alone, however many, take nothing
        limits.check("PLAIN", "10.0.0.1", "alice", secret=b"right")
    limits.remember("10.0.0.1", "alice", secret=b"right")
    for _ in range(2):
        limits.check("PLAIN", "10.0.0.1", "mallory")
        limits.refused("10.0.0.1", "mallory")
    with pytest.raises(LoginThrottledError, match=r"from 10\.0\.0\.1"):
        limits.check("PLAIN", "10.0.0.1", "bob")
    limits.refused("10.0.0.1", "bob")  # a refusal with nothing left to take: no error, and it stays spent
    limits.check("PLAIN", "10.0.0.1", "alice", secret=b"right")  # a known pair, with its secret
    with pytest.raises(LoginThrottledError):
        limits.check("PLAIN", "10.0.0.1", "alice", secret=b"wrong")
    # mallory's user bucket (3) lost 2, then 1 more: spent, and refused from the failing address, not a clean one
    limits.refused("10.0.0.2", "mallory")
    with pytest.raises(LoginThrottledError, match="for this user name"):
        limits.check("PLAIN", "10.0.0.2", "mallory")
    limits.check("PLAIN", "10.0.0.3", "mallory")
