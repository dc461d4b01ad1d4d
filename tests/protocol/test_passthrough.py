"""A login passed through (``protocol.passthrough``) is the broker's: its tokens go up unchanged, the broker's answer
comes back with its error code and message, the principal is the user name the client claimed (SCRAM's ``n=``
unescaped, PLAIN's user), the failure budget still stands in front, and a broker that cannot be asked ends the
connection rather than fail the login."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from kafkaguard.bootstrap import build_services
from kafkaguard.config import Listener, load_settings
from kafkaguard.identity.failure_budget import LoginFailureBudget
from kafkaguard.protocol.api_versions import NO_FEATURES
from kafkaguard.protocol.connection import CONNECTION_VERSIONS, Connection
from kafkaguard.protocol.mechanisms import Authenticated, Challenge, Failed, MechanismServer
from kafkaguard.protocol.passthrough import (
    LoginUnavailable,
    OAuthBearerPassthroughServer,
    PassthroughMechanisms,
    PassthroughServer,
    RelayedAnswer,
    claimed_user,
)
from kafkaguard.protocol.sasl import SaslState
from kafkaguard.protocol.scope import BrokerInfo, ListenerContext
from tests.protocol.test_connection import RecordingWriter
from tests.wire import decode_response, encode_request, frame

CLIENT = "10.0.0.7"
FIRST = b"n,,n=al=2Cice=3D,r=fyko+d2lbbFgONRv9qkxdawL"
FINAL = b"c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts="
KAFKA_REFUSAL = (
    "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"
)


@dataclass
class Broker:
    """A ``LoginRelay`` answering from a script: one answer per token, in order."""

    answers: list[RelayedAnswer]
    received: list[tuple[str, bytes, bool]] = field(default_factory=list)
    down: bool = False

    async def relay_login(self, mechanism: str, token: bytes, *, first: bool) -> RelayedAnswer:
        if self.down:
            raise LoginUnavailable("upstream 127.0.0.1:9092 could not be asked about a login: ConnectionRefusedError")
        self.received.append((mechanism, token, first))
        return self.answers.pop(0)


def ok(token: bytes = b"", lifetime_ms: int = 0) -> RelayedAnswer:
    return RelayedAnswer(0, None, token, lifetime_ms)


def refused(message: str = KAFKA_REFUSAL) -> RelayedAnswer:
    return RelayedAnswer(int(ErrorCode.sasl_authentication_failed), message, b"")


def budget(**limits: int) -> LoginFailureBudget:
    return LoginFailureBudget(address_burst=limits.get("address", 10), user_burst=limits.get("user", 10))


def steps(server: MechanismServer, *tokens: bytes) -> list[object]:
    async def run() -> list[object]:
        return [await server.step(token) for token in tokens]

    return asyncio.run(run())


def test_the_principal_is_the_scram_name_unescaped_and_plain_s_user() -> None:
    assert claimed_user("SCRAM-SHA-256", FIRST) == ("al,ice=", None)
    assert claimed_user("PLAIN", b"\x00bob\x00secret") == ("bob", None)
    assert claimed_user("PLAIN", b"bob\x00bob\x00secret") == ("bob", None)
    assert claimed_user("PLAIN", b"no separators") == (None, None)  # the broker refuses it in its own words
    assert claimed_user("SCRAM-SHA-512", b"not scram") == (None, None)
    user, refusal = claimed_user("SCRAM-SHA-512", b"n,,n=tok,r=abc,tokenauth=true")
    assert user is None and refusal is not None and "delegation token" in refusal


def test_a_scram_login_is_the_broker_s_tokens_and_verdict() -> None:
    broker = Broker([ok(b"r=server-first"), ok(b"v=server-final", lifetime_ms=60_000)])
    server = PassthroughServer("SCRAM-SHA-256", broker, budget(), CLIENT)
    challenge, done = steps(server, FIRST, FINAL)
    assert challenge == Challenge(b"r=server-first")
    assert isinstance(done, Authenticated) and done.token == b"v=server-final"
    assert done.login.user == "al,ice=" and done.login.mechanism == "SCRAM-SHA-256"
    assert done.login.credential is None and done.login.relayed_lifetime_ms == 60_000
    assert broker.received == [("SCRAM-SHA-256", FIRST, True), ("SCRAM-SHA-256", FINAL, False)]


def test_the_broker_s_refusal_is_passed_on_with_its_code_and_message() -> None:
    broker = Broker([ok(b"r=server-first"), refused()])
    (_, failed) = steps(PassthroughServer("SCRAM-SHA-256", broker, budget(), CLIENT), FIRST, FINAL)
    assert failed == Failed(KAFKA_REFUSAL, error_code=int(ErrorCode.sasl_authentication_failed), relayed=True)


def test_an_unknown_user_refused_at_client_first_pays_into_the_budget() -> None:
    limits = budget(address=2)
    for _ in range(2):
        (failed,) = steps(PassthroughServer("SCRAM-SHA-256", Broker([refused()]), limits, CLIENT), FIRST)
        assert isinstance(failed, Failed) and failed.relayed
    broker = Broker([ok(b"r=never")])
    (throttled,) = steps(PassthroughServer("SCRAM-SHA-256", broker, limits, CLIENT), FIRST)
    assert isinstance(throttled, Failed) and throttled.throttled
    assert broker.received == []  # refused in front: the broker is not asked


def test_a_plain_success_gives_its_budget_back() -> None:
    limits = budget(address=1)
    for _ in range(3):  # a burst of one, yet every success leaves it whole
        (done,) = steps(PassthroughServer("PLAIN", Broker([ok()]), limits, CLIENT), b"\x00bob\x00secret")
        assert isinstance(done, Authenticated) and done.login.user == "bob"
    wrong = "Authentication failed: Invalid username or password"
    (failed,) = steps(PassthroughServer("PLAIN", Broker([refused(wrong)]), limits, CLIENT), b"\x00bob\x00bad")
    assert isinstance(failed, Failed) and failed.message == wrong
    # a wrong password is no known pair: it spent the address's one failure, so a name not known there is refused
    # in front, the broker never asked; bob with his right password still may log in (a known pair)
    broker = Broker([ok()])
    (throttled,) = steps(PassthroughServer("PLAIN", broker, limits, CLIENT), b"\x00carol\x00secret")
    assert isinstance(throttled, Failed) and throttled.throttled and broker.received == []
    (done,) = steps(PassthroughServer("PLAIN", Broker([ok()]), limits, CLIENT), b"\x00bob\x00secret")
    assert isinstance(done, Authenticated)


def test_a_broker_that_cannot_be_asked_ends_the_connection_not_the_login() -> None:
    limits = budget(address=1)
    server = PassthroughServer("PLAIN", Broker([], down=True), limits, CLIENT)
    with pytest.raises(LoginUnavailable):
        steps(server, b"\x00bob\x00secret")
    (done,) = steps(PassthroughServer("PLAIN", Broker([ok()]), limits, CLIENT), b"\x00bob\x00secret")
    assert isinstance(done, Authenticated)  # the unanswered attempt cost nothing


def test_only_the_mechanisms_passed_through_go_to_the_broker() -> None:
    own = SimpleNamespace(server=lambda name, **_: f"kafkaguard's {name}")
    mechanisms = PassthroughMechanisms(own, Broker([]), frozenset({"PLAIN", "OAUTHBEARER", "GSSAPI"}), budget())
    assert isinstance(mechanisms.server("PLAIN", client=CLIENT, reauthentication=False), PassthroughServer)
    oauth = mechanisms.server("OAUTHBEARER", client=CLIENT, reauthentication=False)
    assert isinstance(oauth, OAuthBearerPassthroughServer)
    # GSSAPI cannot pass through (a ticket is bound to its service): kafkaguard's own, as every mechanism not passed
    own_servers: list[object] = [mechanisms.server(name, client=CLIENT, reauthentication=False)
                                 for name in ("GSSAPI", "SCRAM-SHA-512")]  # fmt: skip
    assert own_servers == ["kafkaguard's GSSAPI", "kafkaguard's SCRAM-SHA-512"]


def test_sasl_answers_the_broker_s_error_code_its_lifetime_and_no_extra_delay() -> None:
    handshake = SimpleNamespace(mechanism="PLAIN")

    async def login(answer: RelayedAnswer) -> tuple[SaslState, object]:
        relay = Broker([answer])
        sasl = SaslState(["PLAIN"], PassthroughMechanisms(None, relay, frozenset({"PLAIN"}), budget()),  # type: ignore[arg-type]
                         CLIENT, session_lifetime_ms=3_600_000)  # fmt: skip
        sasl.handshake(1, handshake)
        return sasl, await sasl.authenticate(2, SimpleNamespace(auth_bytes=b"\x00bob\x00pw"))

    sasl, outcome = asyncio.run(login(ok(lifetime_ms=0)))
    assert sasl.user == "bob" and not outcome.failed  # type: ignore[attr-defined]
    assert sasl.session_lifetime_ms == 0  # the broker's (none), not kafkaguard's connections_max_reauth_ms
    sasl, outcome = asyncio.run(login(RelayedAnswer(int(ErrorCode.illegal_sasl_state), "broker says no", b"")))
    assert outcome.failed and not outcome.delay  # type: ignore[attr-defined]
    assert outcome.response.error_code == ErrorCode.illegal_sasl_state  # type: ignore[attr-defined]
    assert outcome.response.error_message == "broker says no"  # type: ignore[attr-defined]


class RelayingDispatcher:
    """A dispatcher whose connection's logins go to ``relay`` (as the proxy's in passthrough); no request after."""

    versions = CONNECTION_VERSIONS
    features = NO_FEATURES

    def __init__(self, relay: Broker) -> None:
        self.login_relay = relay

    walked: frozenset[object] = frozenset()

    async def dispatch(self, incoming: object) -> object:
        raise AssertionError("no request after login in these tests")

    async def dispatch_walked(self, walked: object) -> object:
        raise AssertionError("no request after login in these tests")

    async def close(self) -> None:
        return None


def connection_run(tmp_path: Path, relay: Broker) -> RecordingWriter:
    """A PLAIN login on a connection whose logins pass through ``relay``: what the connection wrote."""
    services = build_services(load_settings(None, data_dir=tmp_path / "data", sasl_plain_without_tls=True,
                                            sasl_mechanisms=["SCRAM-SHA-256", "PLAIN"]))  # fmt: skip

    async def go() -> RecordingWriter:
        reader = asyncio.StreamReader()
        reader.feed_data(frame(encode_request(SaslHandshakeRequest(mechanism="PLAIN"), 1)))
        reader.feed_data(frame(encode_request(SaslAuthenticateRequest(auth_bytes=b"\x00bob\x00bob-secret"), 2)))
        reader.feed_eof()
        writer = RecordingWriter()
        context = ListenerContext(services, Listener.parse("SASL_PLAINTEXT://127.0.0.1:0"),
                                  BrokerInfo(1, "broker", 9092, "c1"))  # fmt: skip
        await Connection(context, RelayingDispatcher(relay), reader, writer).run()  # type: ignore[arg-type]
        return writer

    try:
        return asyncio.run(go())
    finally:
        services.close()


def test_a_connection_s_login_passes_through_its_relay(tmp_path: Path) -> None:
    relay = Broker([ok(lifetime_ms=0)])
    writer = connection_run(tmp_path, relay)
    handshake, answer = writer.frames()
    assert decode_response(handshake, 17, 1)[1].error_code.value == 0
    correlation_id, body = decode_response(answer, 36, 2)
    assert correlation_id == 2 and body.error_code.value == 0
    assert relay.received == [("PLAIN", b"\x00bob\x00bob-secret", True)]


def test_a_broker_that_cannot_be_asked_closes_the_connection_without_an_answer(tmp_path: Path) -> None:
    writer = connection_run(tmp_path, Broker([], down=True))
    (handshake,) = writer.frames()  # the handshake is answered; the login is not: no false "authentication failed"
    assert decode_response(handshake, 17, 1)[1].error_code.value == 0
    assert writer.closed


@dataclass
class SlowBroker:
    """A ``LoginRelay`` that answers only once ``waiting`` logins are in flight at once (a broker slower than the
    clients), each with ``answer(token)``."""

    waiting: int
    right: bytes
    in_flight: int = 0
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    async def relay_login(self, mechanism: str, token: bytes, *, first: bool) -> RelayedAnswer:
        self.in_flight += 1
        if self.in_flight >= self.waiting:
            self.arrived.set()
        await asyncio.wait_for(self.arrived.wait(), 10)
        if token.endswith(self.right):
            return ok()
        return refused("Authentication failed: Invalid username or password")


def test_logins_in_flight_take_nothing_from_the_budget() -> None:
    """50 right PLAIN logins of one address, all waiting for the broker at once, with an address burst of 2: all are
    accepted (held tokens refused all but two of them). Then wrong passwords spend the budget as before: the burst
    of them waiting at once is checked, and the next is refused in front."""

    async def run() -> None:
        limits = budget(address=2, user=2)
        broker = SlowBroker(50, b"\x00right")
        servers = [PassthroughServer("PLAIN", broker, limits, CLIENT) for _ in range(50)]
        done = await asyncio.gather(*(server.step(f"\x00user-{n}\x00right".encode())
                                      for n, server in enumerate(servers)))  # fmt: skip
        assert [type(step) for step in done] == [Authenticated] * 50
        wrong = SlowBroker(2, b"\x00right")
        failed = await asyncio.gather(*(PassthroughServer("PLAIN", wrong, limits, CLIENT).step(b"\x00eve\x00bad")
                                        for _ in range(2)))  # fmt: skip
        assert all(isinstance(step, Failed) and step.relayed for step in failed)
        after = await PassthroughServer("PLAIN", wrong, limits, CLIENT).step(b"\x00eve\x00bad")
        assert isinstance(after, Failed) and after.throttled and wrong.in_flight == 2  # the broker was not asked
        known = await PassthroughServer("PLAIN", SlowBroker(1, b"\x00right"), limits, CLIENT).step(
            b"\x00user-7\x00right"
        )
        assert isinstance(known, Authenticated)  # a known pair, with its right password: still checked

    asyncio.run(run())


def test_a_plain_user_is_a_known_pair_on_its_next_connection() -> None:
    """Each connection makes its own ``PassthroughMechanisms``; the HMAC of a PLAIN password they give the budget is
    keyed per process, so a right password logged in on one connection is a known pair on the next (a key per
    connection made none ever known). A wrong password still is not."""
    limits = budget(address=1)

    def plain(token: bytes, answer: RelayedAnswer) -> object:
        mechanisms = PassthroughMechanisms(None, Broker([answer]), frozenset({"PLAIN"}), limits)  # type: ignore[arg-type]
        (step,) = steps(mechanisms.server("PLAIN", client=CLIENT, reauthentication=False), token)
        return step

    assert isinstance(plain(b"\x00bob\x00right", ok()), Authenticated)
    assert isinstance(plain(b"\x00eve\x00wrong", refused()), Failed)  # the address's one failure
    assert isinstance(plain(b"\x00bob\x00right", ok()), Authenticated)
    wrong = plain(b"\x00bob\x00wrong", ok())
    assert isinstance(wrong, Failed) and wrong.throttled
