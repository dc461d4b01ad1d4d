"""``identity.kerberos``: both sides of SASL/GSSAPI against the test's own KDC (``tests.kerberos``), in process: the
exchange in Java's order, the principal proved, a client in another realm over the trust, and each refusal — a
keytab without the service's key, a ticket for another service, a token where the empty one belongs, a security
layer that was not offered, a token after the end."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import gssapi
import pytest

from kafkaguard.identity.kerberos import (
    Acceptor,
    GssapiServerExchange,
    Initiator,
    KerberosError,
    default_realm,
)
from tests.kerberos import MAIN, OTHER, SERVICE, SERVICE_HOST, SERVICE_PRINCIPAL, Kdc, kerberos_env


@pytest.fixture(autouse=True)
def _kerberos(kdc: Kdc) -> Iterator[None]:
    with kerberos_env(kdc):
        yield


def context_token(kdc: Kdc, principal: str, service: str = SERVICE) -> tuple[gssapi.SecurityContext, bytes]:
    """A client context of ``principal`` towards ``<service>/localhost`` and its first token."""
    credentials = Initiator(kdc.principal(principal), principal)._credentials
    target = gssapi.Name(f"{service}@{SERVICE_HOST}", gssapi.NameType.hostbased_service)
    context = gssapi.SecurityContext(name=target, creds=credentials, usage="initiate")
    return context, context.step() or b""


def test_the_default_realm_is_krb5_confs() -> None:
    assert default_realm() == MAIN


@pytest.mark.parametrize("principal", [f"alice@{MAIN}", f"svc/host1@{MAIN}", f"Bob@{OTHER}"])
def test_both_sides_exchange_as_java_does_and_the_peer_is_proved(kdc: Kdc, principal: str) -> None:
    server = Acceptor(kdc.service_keytab, SERVICE_PRINCIPAL).exchange()
    client = Initiator(kdc.principal(principal), principal).exchange(SERVICE, SERVICE_HOST)
    ap_rep, done = server.step(client.first())
    assert (done, server.peer) == (False, principal)
    empty = client.step(ap_rep)
    assert empty == b""
    offer, done = server.step(empty)
    assert not done
    answer = client.step(offer)
    assert answer
    last, done = server.step(answer)
    assert (last, done, server.done) == (b"", True, True)
    assert client.step(last) is None
    with pytest.raises(KerberosError, match="the exchange is over"):
        server.step(b"")


def test_the_offer_is_no_security_layer_and_64_kib(kdc: Kdc) -> None:
    context, token = context_token(kdc, f"alice@{MAIN}")
    server = Acceptor(kdc.service_keytab, SERVICE_PRINCIPAL).exchange()
    ap_rep, _ = server.step(token)
    context.step(ap_rep)
    offer, _ = server.step(b"")
    assert context.unwrap(offer).message == b"\x01\x01\x00\x00"


def test_a_layer_that_was_not_offered_is_refused(kdc: Kdc) -> None:
    context, token = context_token(kdc, f"alice@{MAIN}")
    server = Acceptor(kdc.service_keytab, SERVICE_PRINCIPAL).exchange()
    context.step(server.step(token)[0])
    context.unwrap(server.step(b"")[0])
    with pytest.raises(KerberosError, match="Client selected unsupported protection: 4"):
        server.step(context.wrap(b"\x04\x01\x00\x00", False).message)


def test_a_token_where_the_empty_one_belongs_is_refused(kdc: Kdc) -> None:
    _context, token = context_token(kdc, f"alice@{MAIN}")
    server = Acceptor(kdc.service_keytab, SERVICE_PRINCIPAL).exchange()
    server.step(token)
    with pytest.raises(KerberosError, match="Handshake expecting no response data"):
        server.step(b"x")


def test_a_ticket_for_another_service_and_garbage_are_refused(kdc: Kdc) -> None:
    kdc.principal(f"other/{SERVICE_HOST}@{MAIN}")
    _, token = context_token(kdc, f"alice@{MAIN}", service="other")
    acceptor = Acceptor(kdc.service_keytab, SERVICE_PRINCIPAL)
    with pytest.raises(KerberosError):
        acceptor.exchange().step(token)
    with pytest.raises(KerberosError):
        acceptor.exchange().step(b"\x60\x03abc")


def test_a_keytab_without_the_principal_is_refused_at_start(kdc: Kdc, tmp_path: Path) -> None:
    with pytest.raises(KerberosError, match="No key table entry found for kafka/localhost"):
        Acceptor(kdc.principal(f"alice@{MAIN}"), SERVICE_PRINCIPAL)
    with pytest.raises(KerberosError, match="cannot be read"):
        Acceptor(tmp_path / "none.keytab", SERVICE_PRINCIPAL)
    with pytest.raises(KerberosError, match="cannot be read"):
        Initiator(tmp_path / "none.keytab", f"alice@{MAIN}")


def test_the_client_refuses_a_server_without_the_no_layer_option(kdc: Kdc) -> None:
    principal = f"alice@{MAIN}"
    client = Initiator(kdc.principal(principal), principal).exchange(SERVICE, SERVICE_HOST)
    server = Acceptor(kdc.service_keytab, SERVICE_PRINCIPAL).exchange()
    ap_rep, _ = server.step(client.first())
    client.step(ap_rep)
    integrity_only = server._context.wrap(b"\x02\x01\x00\x00", False).message
    with pytest.raises(KerberosError, match="offers no SASL/GSSAPI exchange without a security layer"):
        client.step(integrity_only)


def test_exchanges_do_not_share_state(kdc: Kdc) -> None:
    acceptor = Acceptor(kdc.service_keytab, SERVICE_PRINCIPAL)
    first, second = acceptor.exchange(), acceptor.exchange()
    assert isinstance(first, GssapiServerExchange)
    first.step(context_token(kdc, f"alice@{MAIN}")[1])
    assert (first.peer, second.peer) == (f"alice@{MAIN}", None)
