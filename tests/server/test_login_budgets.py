"""One failure budget for every login mechanism, against real ``kafkaguard serve`` processes with the default budget
(issue 36 items 2 and 3): guesses against one user from many addresses, SCRAM guesses from one address, an mTLS
client with a bad certificate, and a flood of OAUTHBEARER tokens with a new ``kid`` each (a ``file:`` JWKS and an
https one served by this test).

Each test fails on the code before (a1dee34): there PLAIN was budgeted per address only (48 guesses from 8
addresses, all checked), SCRAM, OAUTHBEARER and client certificates not at all, and every new kid made the JWKS
reload (40 tokens, 40 reads).
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import re
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import scramp  # type: ignore[import-untyped]
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from tests.identity.certs import CertificateSet, write_certificates
from tests.identity.jwks_server import jwks_endpoint
from tests.identity.tokens import AUDIENCE, ISSUER, claims, jwks_document, session_keys, sign, write_jwks
from tests.server.test_cli_serve import KAFKAGUARD, free_port, wait_until_listening
from tests.wire import Wire

pytestmark = pytest.mark.integration

SASL_AUTHENTICATION_FAILED = 58
WRONG = "not-the-password"
#: The defaults these tests rely on (config.py): address 10 then 30 a minute, user 20 then 10 a minute, 6
#: expedited JWKS refreshes a minute.
ADDRESS_BURST, USER_BURST, EXPEDITED_PER_MINUTE = 10, 20, 6
THROTTLED = re.compile(r"^Authentication failed: Too many failed logins .*retry after \d+ s$")


@dataclass
class Serve:
    process: subprocess.Popen[bytes]
    port: int
    http_port: int
    log: Path

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    def metric(self, name: str, **labels: str) -> float:
        """A sample of the console's /metrics (0 when absent)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}/metrics", timeout=10) as answer:
            text = answer.read().decode()
        wanted = ",".join(f'{key}="{value}"' for key, value in sorted(labels.items()))
        for line in text.splitlines():
            sample, _, value = line.rpartition(" ")
            if sample == (f"{name}{{{wanted}}}" if labels else name):
                return float(value)
        return 0.0

    def log_lines(self, pattern: str) -> int:
        return sum(1 for line in self.log.read_text(errors="replace").splitlines() if re.search(pattern, line))


@contextmanager
def serve(
    directory: Path, settings: dict[str, Any], users: tuple[str, ...] = ("alice", "bob", "carol")
) -> Iterator[Serve]:
    """``kafkaguard serve`` with ``settings`` in a config file (keys kafkaguard had before issue 36 only, so that the
    code before starts too), users ``<name>`` with password ``<name>-secret``, a console for /metrics, INFO logs."""
    directory.mkdir(parents=True, exist_ok=True)
    data_dir = directory / "data"
    env = {key: value for key, value in os.environ.items() if not key.startswith("KAFKAGUARD_")}
    for user in users:
        subprocess.run([str(KAFKAGUARD), "users", "add", user, "--password", f"{user}-secret", "--data-dir",
                        str(data_dir)], capture_output=True, timeout=60, env=env, check=True)  # fmt: skip
    port, http_port = free_port(), free_port()
    config = directory / "kafkaguard.yaml"
    listeners = [listener.replace("PORT", str(port)) for listener in settings.pop("listeners")]
    config.write_text(json.dumps({"listeners": listeners, "http_listener": f"127.0.0.1:{http_port}",
                                  "auth_failure_delay_ms": 5, **settings}))  # fmt: skip
    log = directory / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen([str(KAFKAGUARD), "serve", "--data-dir", str(data_dir), "--config", str(config),
                                    "--log-level", "INFO"], stdout=out, stderr=subprocess.STDOUT, env=env)  # fmt: skip
    try:
        wait_until_listening(process, port)
        wait_until_listening(process, http_port)
        yield Serve(process, port, http_port, log)
    finally:
        process.terminate()
        process.wait(20)
        assert "Traceback" not in log.read_text(errors="replace"), log.read_text(errors="replace")[-3000:]


def plain(server: Serve, source: str, user: str, password: str) -> tuple[int, str | None]:
    """One SASL/PLAIN login on a new connection from ``source``: (error code, error message)."""
    with Wire(server.address, timeout=10, source=source) as wire:
        assert wire.request(SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
        answer = wire.request(SaslAuthenticateRequest(auth_bytes=f"\x00{user}\x00{password}".encode()))
        return int(answer.error_code), answer.error_message


def scram(server: Serve, source: str, user: str, password: str) -> tuple[int, str | None]:
    """One SCRAM-SHA-256 login from ``source``: (0, None), or the error code and message of the step that failed."""
    client = scramp.ScramClient(["SCRAM-SHA-256"], user, password)
    with Wire(server.address, timeout=10, source=source) as wire:
        assert wire.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-256")).error_code == 0
        first = wire.request(SaslAuthenticateRequest(auth_bytes=client.get_client_first().encode()))
        if first.error_code != 0:
            return int(first.error_code), first.error_message
        client.set_server_first(bytes(first.auth_bytes).decode())
        final = wire.request(SaslAuthenticateRequest(auth_bytes=client.get_client_final().encode()))
        return int(final.error_code), final.error_message


def oauth(server: Serve, source: str, token: str) -> tuple[int, bytes, str | None]:
    """One OAUTHBEARER initial response: (error code, server token, error message)."""
    with Wire(server.address, timeout=10, source=source) as wire:
        assert wire.request(SaslHandshakeRequest(mechanism="OAUTHBEARER")).error_code == 0
        answer = wire.request(SaslAuthenticateRequest(auth_bytes=f"n,,\x01auth=Bearer {token}\x01\x01".encode()))
        return int(answer.error_code), bytes(answer.auth_bytes), answer.error_message


def regained(seconds: float, per_minute: float) -> int:
    """Tokens a bucket may have regained in ``seconds`` (the budget refills continuously; these loads take seconds)."""
    return int(seconds * per_minute / 60) + 1


def spend(attempt: Callable[[int], str | None], limit: int = 60) -> tuple[int, str, float]:
    """Fail ``attempt(n)`` (it returns the failure message, None for a success) until the budget refuses one: (how
    many failures were checked before, the refusal, the seconds it took)."""
    started = time.monotonic()
    for number in range(limit):
        message = attempt(number)
        assert message is not None, f"attempt {number} succeeded"
        if THROTTLED.match(message):
            return number, message, time.monotonic() - started
    raise AssertionError(f"no refusal in {limit} failed logins")


def refused_at_once(spend_again: Callable[[], object], attempt: Callable[[int], bool], rounds: int = 3) -> bool:
    """Whether ``attempt(round)`` is refused right after the budget was spent (``spend_again``). A bucket refills
    continuously, so a token may come due between the two: then spend and try again, a few rounds."""
    for number in range(rounds):
        spend_again()
        if attempt(number):
            return True
    return False


def forged(number: int) -> str:
    """A token naming a kid no JWKS has (a new one each time), signed by a key no JWKS holds."""
    now = int(time.time())
    return sign(claims(now, sub="mallory"), session_keys().rsa_other, kid=f"forged-{number}")


def valid_token(subject: str) -> str:
    now = int(time.time())
    return sign(claims(now, sub=subject), session_keys().rsa_1, kid="rsa-1")


# ------------------------------------------------------------------------------------------------ per user name


def test_guesses_against_one_user_from_eight_addresses_stop_at_its_budget_and_its_owner_still_logs_in(
    tmp_path: Path,
) -> None:
    """48 wrong PLAIN passwords for alice, 6 from each of 8 addresses (within each address's budget of 10): at most
    the user's burst plus one per address are checked; the rest are refused unchecked. From a failing address alice
    is refused too (bob is not), while from an address that never failed she logs in with PLAIN and SCRAM; once her
    password was checked, PLAIN's cache answers it from anywhere."""
    settings = {"listeners": ["SASL_PLAINTEXT://127.0.0.1:PORT"], "sasl_mechanisms": ["SCRAM-SHA-256", "PLAIN"],
                "sasl_plain_without_tls": True}  # fmt: skip
    with serve(tmp_path, settings) as server:
        started = time.monotonic()
        outcomes = [plain(server, f"127.0.2.{1 + guess % 8}", "alice", WRONG) for guess in range(48)]
        seconds = time.monotonic() - started
        checked = [m for c, m in outcomes if m == "Authentication failed: Invalid username or password"]
        refused = [m for c, m in outcomes if m is not None and THROTTLED.match(m)]
        assert {c for c, _ in outcomes} == {SASL_AUTHENTICATION_FAILED}
        assert len(checked) + len(refused) == 48
        assert USER_BURST <= len(checked) <= USER_BURST + 8 + regained(seconds, 10), f"{len(checked)} checked"
        assert all("for this user name" in m for m in refused)
        code, message = plain(server, "127.0.2.1", "alice", "alice-secret")  # failing, and alice's budget is spent
        assert code == SASL_AUTHENTICATION_FAILED and message is not None and THROTTLED.match(message)
        assert plain(server, "127.0.2.1", "bob", "bob-secret") == (0, None)  # only alice's name is spent
        assert plain(server, "127.0.2.100", "alice", "alice-secret") == (0, None)  # a clean address: checked
        assert scram(server, "127.0.2.101", "alice", "alice-secret") == (0, None)
        assert plain(server, "127.0.2.1", "alice", "alice-secret") == (0, None)  # checked once, now cached
        assert server.metric("kafkaguard_login_throttled_total", mechanism="PLAIN", key="user") == len(refused) + 1


# ------------------------------------------------------------------------------------------------ per address


def test_scram_guesses_from_one_address_stop_at_its_budget(tmp_path: Path) -> None:
    """SCRAM's proof is checked cheaply, but each check is a guess: from one address, 10 wrong proofs (other names
    each time, known and unknown alike; a few more as tokens come due), then refusals at client-first, before any
    salt is sent. Alice, who logged in from that address before, still does (a known pair); carol and dave, who never
    did, are refused there (one of them: a token may come due between), and log in from another address."""
    users = ("alice", "bob", "carol", "dave", "erin")
    with serve(tmp_path, {"listeners": ["SASL_PLAINTEXT://127.0.0.1:PORT"]}, users) as server:
        assert scram(server, "127.0.3.1", "alice", "alice-secret") == (0, None)
        names = iter(["bob", "carol", *(f"nobody-{number}" for number in range(200))])

        def guess(_number: int) -> str | None:
            return scram(server, "127.0.3.1", next(names), WRONG)[1]

        checked, refusal, seconds = spend(guess)
        assert ADDRESS_BURST <= checked <= ADDRESS_BURST + regained(seconds, 30)
        assert refusal.startswith("Authentication failed: Too many failed logins from 127.0.3.1; retry after")
        assert scram(server, "127.0.3.1", "alice", "alice-secret") == (0, None)  # a known pair
        newcomers = users[2:]  # a new one each round: one that logs in becomes a known pair

        def newcomer_refused(number: int) -> bool:
            name = newcomers[number]
            return scram(server, "127.0.3.1", name, f"{name}-secret")[0] == SASL_AUTHENTICATION_FAILED

        assert refused_at_once(lambda: spend(guess), newcomer_refused)
        assert scram(server, "127.0.3.2", "carol", "carol-secret") == (0, None)
        assert scram(server, "127.0.3.2", "dave", "dave-secret") == (0, None)
        throttled = server.metric("kafkaguard_login_throttled_total", mechanism="SCRAM-SHA-256", key="address")
        assert throttled >= 2
        assert server.metric("kafkaguard_connections_refused_total", listener=f"SASL_PLAINTEXT://127.0.0.1:"
                             f"{server.port}", reason="login_failures") == throttled  # fmt: skip


# ------------------------------------------------------------------------------------------------ one per process


def console_status(server: Serve, source: str, user: str, password: str) -> int:
    """The status of ``GET /api/acls`` with HTTP Basic from ``source``."""
    connection = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=10, source_address=(source, 0))
    try:
        basic = base64.b64encode(f"{user}:{password}".encode()).decode()
        connection.request("GET", "/api/acls", headers={"Authorization": f"Basic {basic}"})
        return connection.getresponse().status
    finally:
        connection.close()


def test_the_console_and_the_kafka_listener_draw_from_one_budget(tmp_path: Path) -> None:
    """``serve --http-listener``: wrong console passwords from an address spend its budget for the Kafka listener
    too, and the reverse, whoever the name; another address is not concerned."""
    with serve(tmp_path, {"listeners": ["SASL_PLAINTEXT://127.0.0.1:PORT"]}) as server:
        names = iter(f"name-{number}" for number in range(1000))

        def console_until_429() -> int:
            for number in range(40):
                if console_status(server, "127.0.7.1", next(names), WRONG) == 429:
                    return number
            raise AssertionError("the console never answered 429")

        assert console_until_429() >= ADDRESS_BURST  # each failure answered after 0.25 s: tokens come due meanwhile
        assert refused_at_once(console_until_429, lambda _n: THROTTLED.match(
            scram(server, "127.0.7.1", next(names), WRONG)[1] or "") is not None)  # fmt: skip
        assert scram(server, "127.0.7.2", "alice", "alice-secret") == (0, None)

        def kafka_until_refused() -> object:
            return spend(lambda _n: scram(server, "127.0.7.3", next(names), WRONG)[1])

        assert refused_at_once(kafka_until_refused, lambda _n: console_status(server, "127.0.7.3", "bob",
                                                                              "bob-secret") == 429)  # fmt: skip
        assert server.metric("kafkaguard_login_throttled_total", mechanism="console", key="address") >= 2


# ------------------------------------------------------------------------------------------------ mTLS


def over_tls(port: int, source: str, certs: CertificateSet, client: str) -> bool:
    """Whether a TLS client with ``certs``' certificate ``client`` from ``source`` gets ApiVersions answered."""
    context = ssl.create_default_context(cafile=str(certs.ca))
    context.load_cert_chain(certs.clients[client].cert, certs.clients[client].key)
    try:
        with Wire(("127.0.0.1", port), tls=context, timeout=10, source=source) as wire:
            request = ApiVersionsRequest(client_software_name="t", client_software_version="1")
            return bool(wire.request(request).error_code == 0)
    except (OSError, AssertionError):  # the handshake failed (ssl.SSLError is an OSError) or the server closed
        return False


def test_an_mtls_client_with_a_bad_certificate_spends_its_address_budget(tmp_path: Path) -> None:
    """Handshakes with a certificate the listener's CA did not sign fail as before, 10 of them (a few more as tokens
    come due); then the address is closed before its handshake, even with a good certificate, while another address
    with the same certificate is served."""
    trusted, untrusted = write_certificates(tmp_path / "trusted"), write_certificates(tmp_path / "untrusted")
    ssl_port = free_port()
    settings = {"listeners": ["SASL_PLAINTEXT://127.0.0.1:PORT", f"SSL://127.0.0.1:{ssl_port}"],
                "ssl_certfile": str(trusted.server.cert), "ssl_keyfile": str(trusted.server.key),
                "ssl_client_auth": "required", "ssl_cafile": str(trusted.ca)}  # fmt: skip
    with serve(tmp_path, settings) as server:
        wait_until_listening(server.process, ssl_port)

        def refusals() -> float:  # closed before the handshake (the client cannot tell it from a failed one)
            return server.metric("kafkaguard_login_throttled_total", mechanism="SSL", key="address")

        assert over_tls(ssl_port, "127.0.4.1", trusted, "plain")  # a success gives its token back

        def bad_until_refused() -> int:
            started, before = time.monotonic(), refusals()
            for number in range(40):
                assert not over_tls(ssl_port, "127.0.4.1", untrusted, "plain")
                if refusals() > before:
                    assert number <= ADDRESS_BURST + regained(time.monotonic() - started, 30)
                    return number
            raise AssertionError("never refused before the handshake")

        assert bad_until_refused() >= ADDRESS_BURST

        def good_refused(_number: int) -> bool:
            before = refusals()
            return not over_tls(ssl_port, "127.0.4.1", trusted, "plain") and refusals() == before + 1

        assert refused_at_once(bad_until_refused, good_refused)
        assert over_tls(ssl_port, "127.0.4.2", trusted, "plain")
        failed = server.metric("kafkaguard_logins_total", listener=f"SSL://127.0.0.1:{ssl_port}", mechanism="SSL",
                               result="failed")  # fmt: skip
        assert failed >= ADDRESS_BURST


# ------------------------------------------------------------------------------------------------ the kid flood


def oauth_settings(url: str, **more: Any) -> dict[str, Any]:
    return {"listeners": ["SASL_PLAINTEXT://127.0.0.1:PORT"], "sasl_mechanisms": ["SCRAM-SHA-256", "OAUTHBEARER"],
            "sasl_oauthbearer_jwks_endpoint_url": url, "sasl_oauthbearer_expected_audience": [AUDIENCE],
            "sasl_oauthbearer_expected_issuer": ISSUER, **more}  # fmt: skip


def flood(server: Serve, addresses: int = 8, each: int = 5) -> list[tuple[int, bytes, str | None]]:
    """``addresses`` × ``each`` forged tokens, a new kid every time, round-robin over 127.0.5.1…"""
    return [oauth(server, f"127.0.5.{1 + n % addresses}", forged(n)) for n in range(addresses * each)]


def test_a_kid_flood_reloads_a_file_jwks_at_most_the_limit(tmp_path: Path) -> None:
    """40 tokens with new kids from 8 addresses (within each address's budget): each is refused as before, with
    Kafka's invalid_token challenge, but the file is read again at most 6 times (it was 40). A valid token from a
    clean address still logs in."""
    jwks = write_jwks(tmp_path / "jwks.json", jwks_document())
    with serve(tmp_path, oauth_settings(jwks.as_uri())) as server:
        outcomes = flood(server)
        assert {(code, token) for code, token, _ in outcomes} == {(0, b'{"status":"invalid_token"}')}
        reloads = server.log_lines(r"JWKS refresh of .* complete")
        assert 1 <= reloads <= EXPEDITED_PER_MINUTE, f"{reloads} reloads"
        assert server.metric("kafkaguard_jwks_refreshes_total", reason="unknown_kid") == reloads
        assert server.metric("kafkaguard_jwks_refreshes_skipped_total", reason="rate_limited") == 40 - reloads
        assert oauth(server, "127.0.5.100", valid_token("svc-a"))[0] == 0


def test_a_kid_flood_fetches_an_https_jwks_at_most_the_limit_and_a_spent_address_none(tmp_path: Path) -> None:
    """The same flood against an identity provider (an https JWKS served here, counting its requests): at most 6
    fetches after the first (it was 40). Then one address sends 20 more: past its budget of 10 failed logins it is
    refused before its tokens' keys are looked up."""
    with jwks_endpoint(tmp_path / "idp", jwks_document()) as idp:
        settings = oauth_settings(idp.url, sasl_oauthbearer_jwks_endpoint_cafile=str(idp.cafile))
        with serve(tmp_path, settings) as server:
            assert idp.hits == 1  # the start
            flood(server)
            assert 2 <= idp.hits <= 1 + EXPEDITED_PER_MINUTE, f"{idp.hits} fetches"
            started = time.monotonic()
            one = [oauth(server, "127.0.5.200", forged(1000 + n)) for n in range(20)]
            checked = [token for _, token, _ in one if token == b'{"status":"invalid_token"}']
            assert ADDRESS_BURST <= len(checked) <= ADDRESS_BURST + regained(time.monotonic() - started, 30)
            for code, token, message in one[len(checked) :]:
                assert code == SASL_AUTHENTICATION_FAILED and token == b""
                assert message is not None and THROTTLED.match(message)
            throttled = server.metric("kafkaguard_login_throttled_total", mechanism="OAUTHBEARER", key="address")
            assert throttled == 20 - len(checked)
            assert idp.hits <= 1 + EXPEDITED_PER_MINUTE
            assert oauth(server, "127.0.5.201", valid_token("svc-b"))[0] == 0


def test_the_cli_serves_with_the_budget_settings(tmp_path: Path) -> None:
    """The new settings are config-file keys a real process reads (and refuses when wrong)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("KAFKAGUARD_")}
    config = tmp_path / "bad.yaml"
    config.write_text(json.dumps({"login_failures_per_user_burst": 0}))
    started = subprocess.run([str(KAFKAGUARD), "serve", "--data-dir", str(tmp_path / "d"), "--config", str(config),
                              "--listener", f"SASL_PLAINTEXT://127.0.0.1:{free_port()}"],
                             capture_output=True, timeout=60, env=env, check=False)  # fmt: skip
    assert started.returncode == 2
    assert b"login_failures_per_user_burst" in started.stderr
    with serve(tmp_path / "ok", {"listeners": ["SASL_PLAINTEXT://127.0.0.1:PORT"], "login_failures_per_user_burst": 1,
                                 "login_failure_memory_seconds": 60}) as server:  # fmt: skip
        assert scram(server, "127.0.6.1", "alice", WRONG)[0] == SASL_AUTHENTICATION_FAILED
        code, message = scram(server, "127.0.6.1", "alice", "alice-secret")
        assert code == SASL_AUTHENTICATION_FAILED and message is not None and "for this user name" in message
        assert scram(server, "127.0.6.2", "alice", "alice-secret") == (0, None)
