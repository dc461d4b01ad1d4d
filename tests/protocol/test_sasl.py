"""SASL/SCRAM logins against a real server: unknown users look like the stored ones, a login never waits on the
store, a user added by another process can log in within the sync interval, and every login is counted (per
listener and mechanism) and a failed one logged as Kafka logs it, without a secret."""

from __future__ import annotations

import base64
import logging
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import scramp  # type: ignore[import-untyped]
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v0.request import SaslHandshakeRequest as SaslHandshakeRequestV0
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from kafkaguard.audit.records.logins import LoginResult
from kafkaguard.config import SecurityProtocol
from kafkaguard.console.metrics import ConsoleMetrics
from kafkaguard.scram import ScramMechanism, parse_server_first
from kafkaguard.service import ScramUpsertion
from kafkaguard.store import DATABASE_NAME, SqliteStore
from tests.actors import ACTOR
from tests.serving import ADMIN, ADMIN_PASSWORD, ServerHandle, TlsFiles, start_server
from tests.wire import Wire, encode_request

pytestmark = pytest.mark.integration

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
WRONG_PASSWORD = "not-the-admin-password-5f3a"  # noqa: S105 - the secret whose leaks the tests look for


@pytest.fixture
def own_server(tmp_path: Path, tls_files: TlsFiles) -> Iterator[ServerHandle]:
    handle = start_server(tmp_path / "data", tls_files, sync_interval_seconds=0.5)
    try:
        yield handle
    finally:
        handle.stop()
    assert handle.errors == []


def server_first(wire: Wire, user: str, mechanism: str = "SCRAM-SHA-256") -> bytes:
    assert wire.request(SaslHandshakeRequest(mechanism=mechanism)).error_code.value == 0
    client = scramp.ScramClient([mechanism], user, "any password")
    first = wire.request(SaslAuthenticateRequest(auth_bytes=client.get_client_first().encode()))
    assert first.error_code.value == 0
    return bytes(first.auth_bytes)


def sasl_listener(handle: ServerHandle) -> str:
    """The listener label logins are counted under: the SASL_PLAINTEXT listener as configured."""
    return next(
        str(listener)
        for listener in handle.services.settings.parsed_listeners
        if listener.protocol is SecurityProtocol.SASL_PLAINTEXT
    )


# --- no user enumeration ---------------------------------------------------------------------------------------


def test_an_unknown_user_is_answered_with_the_shape_of_the_stored_users(own_server: ServerHandle) -> None:
    # Most SCRAM-SHA-256 users came from confluent-kafka (64-byte salts) with 8192 iterations; the admin has 4096.
    upsertions = [
        ScramUpsertion(
            user=f"svc-{n}", mechanism=SHA256, iterations=8192, salt=bytes([n]) * 64, salted_password=b"p" * 32
        )
        for n in range(3)
    ]
    assert all(r.succeeded for r in own_server.services.credentials.alter(upsertions=upsertions, actor=ACTOR))
    shapes = {}
    for user in ("svc-0", "ghost", "nobody-at-all"):
        with Wire(own_server.sasl) as wire:
            parsed = parse_server_first(server_first(wire, user))
        shapes[user] = (parsed.iterations, len(parsed.salt))
    assert shapes == {"svc-0": (8192, 64), "ghost": (8192, 64), "nobody-at-all": (8192, 64)}
    with Wire(own_server.sasl) as wire:  # SCRAM-SHA-512: only the admin (4096 iterations, 24-byte salt)
        parsed = parse_server_first(server_first(wire, "ghost", "SCRAM-SHA-512"))
    assert (parsed.iterations, len(parsed.salt)) == (4096, 24)


def test_the_decoy_secret_never_appears_in_a_repr_of_the_services(own_server: ServerHandle) -> None:
    secret, text = own_server.services.server_secret, repr(own_server.services)
    assert len(secret) >= 16
    assert repr(secret) not in text and secret.hex() not in text and "server_secret" not in text


# --- the event loop never waits on the store ---------------------------------------------------------------------


def held_by_another_thread(lock: Any) -> bool:
    if lock.acquire(blocking=False):
        lock.release()
        return False
    return True


def test_a_login_succeeds_at_once_while_a_credential_write_waits_for_the_database_lock(
    own_server: ServerHandle,
) -> None:
    own_server.add_user("alice", "alice-secret")
    other_process = sqlite3.connect(own_server.data_dir / DATABASE_NAME, isolation_level=None)
    other_process.execute("BEGIN IMMEDIATE")  # another process holds the database's write lock ...
    credentials, store = own_server.services.credentials, own_server.services.store
    assert isinstance(store, SqliteStore)
    # ... so this write (a console PUT, an AlterUserScramCredentials) waits for it, holding the store's lock.
    writer = threading.Thread(
        target=credentials.upsert_password, args=("bob", SHA256, "bob-secret"), kwargs={"actor": ACTOR}
    )
    try:
        writer.start()
        deadline = time.monotonic() + 5
        while not held_by_another_thread(store._lock) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert held_by_another_thread(store._lock), "the writer never reached the database"
        started = time.monotonic()
        with Wire(own_server.sasl, timeout=3) as wire:
            wire.login("alice", "alice-secret", "SCRAM-SHA-512")  # the loop served the whole exchange
        assert time.monotonic() - started < 1.0
    finally:
        other_process.execute("ROLLBACK")
        other_process.close()
        writer.join(40)
    with Wire(own_server.sasl) as wire:
        wire.login("bob", "bob-secret")  # the write that waited went through and reached the snapshot


def test_a_user_added_by_another_process_can_log_in_within_the_sync_interval(own_server: ServerHandle) -> None:
    def login(user: str, password: str) -> bool:
        with Wire(own_server.sasl) as wire:
            try:
                wire.login(user, password)
            except AssertionError:
                return False
            return True

    assert not login("carol", "carol-secret")
    script = (
        "import sys\n"
        "from kafkaguard.model import INTERNAL_ACTOR\n"
        "from kafkaguard.scram import ScramMechanism\n"
        "from kafkaguard.service import CredentialService\n"
        "from kafkaguard.store import SqliteStore\n"
        "with SqliteStore(sys.argv[1]) as store:\n"
        "    result = CredentialService(store).upsert_password(\n"
        "        'carol', ScramMechanism.SCRAM_SHA_256, sys.argv[2], actor=INTERNAL_ACTOR\n"
        "    )\n"
        "    sys.exit(0 if result.succeeded else 1)\n"
    )
    database = str(own_server.data_dir / DATABASE_NAME)
    subprocess.run([sys.executable, "-c", script, database, "carol-secret"], check=True, timeout=60)
    written = time.monotonic()
    interval = own_server.services.settings.sync_interval_seconds
    while not login("carol", "carol-secret"):
        assert time.monotonic() - written < interval + 1.0, "the new user could not log in within the sync interval"
        time.sleep(0.05)


# --- logins are counted and failures logged ------------------------------------------------------------------------


def failed_login(wire: Wire, mechanism: str) -> tuple[bytes, bytes]:
    """A SCRAM exchange with the wrong password; returns the client-final message and the proof it carries."""
    assert wire.request(SaslHandshakeRequest(mechanism=mechanism)).error_code.value == 0
    client = scramp.ScramClient([mechanism], ADMIN, WRONG_PASSWORD)
    first = wire.request(SaslAuthenticateRequest(auth_bytes=client.get_client_first().encode()))
    client.set_server_first(bytes(first.auth_bytes).decode())
    client_final = client.get_client_final().encode()
    final = wire.request(SaslAuthenticateRequest(auth_bytes=client_final))
    assert final.error_code.value == 58  # SASL_AUTHENTICATION_FAILED
    return client_final, client_final.rpartition(b",p=")[2]


def failure_lines(caplog: pytest.LogCaptureFixture, count: int) -> list[logging.LogRecord]:
    """The INFO records of failed authentications, once ``count`` are there (they follow the response)."""
    deadline = time.monotonic() + 5
    while True:
        records = [r for r in caplog.records if r.getMessage().startswith("Failed authentication with ")]
        if len(records) >= count or time.monotonic() > deadline:
            return records
        time.sleep(0.01)


def test_a_failed_login_is_logged_once_with_address_and_mechanism_never_a_secret_and_counted(
    server: ServerHandle, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="kafkaguard")
    logins, listener = server.services.logins, sasl_listener(server)
    metrics = ConsoleMetrics(lambda: 0, logins)
    failed_before = logins.total(LoginResult.FAILED, listener=listener, mechanism="SCRAM-SHA-512")
    ok_before = logins.total(LoginResult.OK, listener=listener, mechanism="SCRAM-SHA-512")
    with Wire(server.sasl) as wire:
        client_final, proof = failed_login(wire, "SCRAM-SHA-512")
        assert wire.closed()
    [record] = failure_lines(caplog, 1)
    assert (record.name, record.levelno) == ("kafkaguard.protocol.sasl", logging.INFO)
    assert record.getMessage() == (
        f"Failed authentication with /127.0.0.1 (listener {listener}, mechanism SCRAM-SHA-512, user 'admin'): "
        "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"
    )
    credential = server.services.credentials.lookup(ADMIN, SHA512)
    assert credential is not None
    for secret in (WRONG_PASSWORD.encode(), ADMIN_PASSWORD.encode(), proof, base64.b64decode(proof), client_final,
                   credential.salt, credential.stored_key, credential.server_key):  # fmt: skip
        for form in (secret.decode("latin-1"), secret.hex(), base64.b64encode(secret).decode()):
            assert form not in caplog.text
    assert logins.total(LoginResult.FAILED, listener=listener, mechanism="SCRAM-SHA-512") == failed_before + 1
    assert logins.total(LoginResult.OK, listener=listener, mechanism="SCRAM-SHA-512") == ok_before
    exported = metrics.render().decode()
    assert (
        f'kafkaguard_logins_total{{listener="{listener}",mechanism="SCRAM-SHA-512",result="failed"}} '
        f"{float(failed_before + 1)}"
    ) in exported
    with Wire(server.sasl) as wire:
        wire.login(ADMIN, ADMIN_PASSWORD, "SCRAM-SHA-512")
    assert logins.total(LoginResult.OK, listener=listener, mechanism="SCRAM-SHA-512") == ok_before + 1
    assert logins.total(LoginResult.FAILED, listener=listener, mechanism="SCRAM-SHA-512") == failed_before + 1
    assert [r for r in caplog.records if r.levelno >= logging.INFO and r.name == record.name] == [record]


def test_a_failed_login_after_a_v0_handshake_is_logged_and_counted_too(
    server: ServerHandle, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kafkaguard")
    logins, listener = server.services.logins, sasl_listener(server)
    failed_before = logins.total(LoginResult.FAILED, listener=listener, mechanism="SCRAM-SHA-256")
    with Wire(server.sasl) as wire:
        assert wire.request(SaslHandshakeRequestV0(mechanism="SCRAM-SHA-256")).error_code.value == 0
        client = scramp.ScramClient(["SCRAM-SHA-256"], "nobody", WRONG_PASSWORD)
        wire.send_frame(client.get_client_first().encode())  # raw tokens after a v0 handshake
        server_first_message = wire.recv_frame()
        assert server_first_message is not None
        client.set_server_first(server_first_message.decode())
        wire.send_frame(client.get_client_final().encode())
        assert wire.recv_frame() is None  # closed after the failure delay, without an answer
    [record] = failure_lines(caplog, 1)
    assert record.getMessage().startswith(
        f"Failed authentication with /127.0.0.1 (listener {listener}, mechanism SCRAM-SHA-256, user 'nobody'): "
    )
    assert WRONG_PASSWORD not in caplog.text
    assert logins.total(LoginResult.FAILED, listener=listener, mechanism="SCRAM-SHA-256") == failed_before + 1


def test_a_claimed_user_name_is_logged_quoted_and_shortened(
    server: ServerHandle, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kafkaguard")
    name = "evil\nFailed authentication with /10.0.0.1 " + "x" * 300
    with Wire(server.sasl) as wire:
        assert wire.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-256")).error_code.value == 0
        # Written by hand: scramp refuses control characters, a hostile client does not.
        first = wire.request(SaslAuthenticateRequest(auth_bytes=b"n,,n=" + name.encode() + b",r=abc"))
        nonce = parse_server_first(bytes(first.auth_bytes)).nonce.encode()
        final = b"c=biws,r=" + nonce + b",p=" + base64.b64encode(bytes(32))
        wire.send_frame(encode_request(SaslAuthenticateRequest(auth_bytes=final), 9))
        wire.recv_frame()
    [record] = failure_lines(caplog, 1)
    message = record.getMessage()
    # One line that cannot be taken for another client's: the newline is escaped, the name cut after 128 characters.
    assert message.startswith("Failed authentication with /127.0.0.1 (") and "\n" not in message
    assert "user 'evil\\nFailed authentication with /10.0.0.1 " in message
    shown = name[:128]  # 41 characters of text, then 87 of the 300 x
    assert repr(shown)[:-1] + "…'" in message and "x" * 88 not in message
