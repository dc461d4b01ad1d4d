"""What the session tests of the server and of the proxy share: raw logged-in connections to watch, credential
changes over the wire (as an admin client sends them) and from another process sharing the SQLite store, and KIP-368
re-authentication by hand."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import scramp  # type: ignore[import-untyped]
from kio.schema.alter_user_scram_credentials.v0.request import (
    AlterUserScramCredentialsRequest,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.static.primitive import i8, i32

from kafkaguard.scram import ScramMechanism, salted_password
from kafkaguard.store import DATABASE_NAME
from tests.wire import Wire, encode_request

#: Slack on top of the sync interval for a change made by another process to close a session (a loaded CI machine).
SLACK_SECONDS = 2.5


def logged_in(address: tuple[str, int], user: str, password: str, mechanism: str = "SCRAM-SHA-256") -> Wire:
    wire = Wire(address)
    wire.login(user, password, mechanism)
    return wire


def answers(wire: Wire) -> bool:
    """Whether the connection still answers a request (Metadata of no topic), or was closed instead."""
    wire.send_frame(encode_request(_no_topics(), wire.next_correlation_id()))
    return wire.recv_frame() is not None


def _no_topics() -> MetadataRequest:
    return MetadataRequest(topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False)


def seconds_until_closed(wire: Wire, timeout: float) -> float | None:
    """Seconds until the server closes ``wire`` without sending anything, or None if it is still open after
    ``timeout``."""
    started = time.monotonic()
    wire.sock.settimeout(timeout)
    try:
        closed = wire.closed()
    finally:
        wire.sock.settimeout(5.0)
    return time.monotonic() - started if closed else None


def alter_credentials(
    wire: Wire, *, deletions: Sequence[tuple[str, int]] = (), upsertions: Sequence[tuple[str, int, str]] = ()
) -> list[tuple[str, int]]:
    """AlterUserScramCredentials v0 on ``wire`` (a logged-in admin): deletions (user, mechanism code), upsertions
    (user, mechanism code, password); returns (user, error code) per result."""
    upserts = []
    for user, code, password in upsertions:
        mechanism = ScramMechanism.from_code(code)
        salt = b"session-test-salt-" + user.encode()
        upserts.append(
            ScramCredentialUpsertion(
                name=user,
                mechanism=i8(code),
                iterations=i32(4096),
                salt=salt,
                salted_password=salted_password(mechanism, password, salt, 4096),
            )
        )
    response = wire.request(
        AlterUserScramCredentialsRequest(
            deletions=tuple(ScramCredentialDeletion(name=user, mechanism=i8(code)) for user, code in deletions),
            upsertions=tuple(upserts),
        )
    )
    return [(str(r.user), int(r.error_code.value)) for r in response.results]


_OTHER_PROCESS = """
import sys
from kafkaguard.model import INTERNAL_ACTOR
from kafkaguard.scram import ScramMechanism
from kafkaguard.service import CredentialService, ScramDeletion
from kafkaguard.store import SqliteStore
database, action, user = sys.argv[1:4]
with SqliteStore(database) as store:
    credentials = CredentialService(store)
    if action == "delete":
        results = credentials.alter(deletions=[ScramDeletion(user=user, mechanism=m) for m in ScramMechanism
                                               if credentials.lookup(user, m) is not None],
                                    actor=INTERNAL_ACTOR)
    else:
        results = [credentials.upsert_password(user, m, sys.argv[4], 4096, actor=INTERNAL_ACTOR)
                   for m in ScramMechanism]
    sys.exit(0 if all(r.succeeded for r in results) else 1)
"""


def change_in_another_process(data_dir: Path, action: str, user: str, password: str = "") -> float:
    """Another process opens the same SQLite store and deletes ``user`` (``action`` "delete") or sets a new
    ``password`` for both mechanisms ("password"); returns the ``time.monotonic()`` when it had committed."""
    database = str(data_dir / DATABASE_NAME)
    subprocess.run([sys.executable, "-c", _OTHER_PROCESS, database, action, user, password], check=True, timeout=60)
    return time.monotonic()


# ------------------------------------------------------------------------------------------- re-authentication


def reauthenticate(wire: Wire, user: str, password: str, mechanism: str = "SCRAM-SHA-256") -> Any:
    """SaslHandshake v1 + SaslAuthenticate v2 × 2 on a logged-in connection; returns the last SaslAuthenticate answer
    (or the first that carries an error). The handshake must be accepted."""
    handshake = wire.request(SaslHandshakeRequest(mechanism=mechanism))
    assert handshake.error_code.value == 0, handshake
    client = scramp.ScramClient([mechanism], user, password)
    first = wire.request(SaslAuthenticateRequest(auth_bytes=client.get_client_first().encode()))
    if first.error_code.value != 0:
        return first
    client.set_server_first(bytes(first.auth_bytes).decode())
    return wire.request(SaslAuthenticateRequest(auth_bytes=client.get_client_final().encode()))


def login_lifetime(wire: Wire, user: str, password: str, mechanism: str = "SCRAM-SHA-256") -> timedelta:
    """Log in with SaslAuthenticate v2 and return the ``session_lifetime_ms`` of its last answer."""
    final = reauthenticate(wire, user, password, mechanism)
    assert final.error_code.value == 0, final
    lifetime: timedelta = final.session_lifetime
    return lifetime
