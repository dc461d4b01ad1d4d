"""SASL/GSSAPI (RFC 4752, Kerberos V5) as Kafka speaks it, both sides, over MIT Kerberos through the ``gssapi``
binding: no Kerberos of kafkaguard's own. The exchanges are I/O-free in the protocol sense (tokens in, tokens out),
but a step may read the keytab, write the replay cache or ask the KDC for a ticket: call them off the event loop
(``protocol.mechanisms.GssapiServer`` runs the server's on a bounded pool; the proxy's upstream login on a thread).

::

    acceptor = Acceptor(Path("/etc/kafka.keytab"), "kafka/broker1.example.com@EXAMPLE.COM")
    server = acceptor.exchange()
    server.step(ap_req)        # → (AP-REP, False): mutual authentication
    server.step(b"")           # → (wrapped offer b"\\x01\\x01\\x00\\x00": no security layer, 64 KiB, False)
    server.step(answer)        # → (b"", True); server.peer == "alice@EXAMPLE.COM"

The exchange, as Java's ``GssKrb5Server`` (which Kafka's broker runs) and ``GssKrb5Client`` do it:

1. the client's initial context token (an AP-REQ for ``<service>/<host>@REALM``); the server accepts it with the
   node's own keytab (``Acceptor``: the ticket is bound to the service it was issued for, so GSSAPI is terminated
   where it arrives, never passed through) and answers the AP-REP, or, when the client asked for no mutual
   authentication, goes on at once with step 2;
2. the client sends an empty token; the server sends the security-layer offer, GSS-wrapped without confidentiality:
   one octet of layers (Kafka offers ``auth`` only: 0x01, no integrity or confidentiality layer), three of maximum
   buffer size (65536, Java's default);
3. the client answers, wrapped: the layer it chose (it must be one offered), its buffer size, and an optional
   authorization id; the exchange ends with an empty server token.

Kafka's broker ignores the authorization id (its ``SaslServerCallbackHandler`` authorizes the authenticated
principal itself; kafka-python sends ``<service>@<host>`` there), and so does ``GssapiServerExchange``: ``peer`` is
the Kerberos principal the ticket proves, which ``kerberos_names`` then maps to the ``User:`` name.

Every failure is a ``KerberosError`` whose message is GSSAPI's own description (major and minor status), which never
holds a key or a ticket; the ``gssapi`` types stay inside this module.
"""

from __future__ import annotations

import itertools
import os
import struct
from enum import Enum, auto
from pathlib import Path
from typing import TYPE_CHECKING

from kafkaguard.errors import KafkaguardError

# The gssapi binding is imported by the functions that use it (the import statement is a dict look-up after the first
# one): a node without GSSAPI never loads it, nor MIT Kerberos's libraries (~3 MiB of its process).
if TYPE_CHECKING:
    import gssapi
    from gssapi.raw.misc import GSSError

#: The security layers of RFC 4752 §3.3; Kafka uses none.
LAYER_NONE = 0x01
#: What Kafka's broker (Java's GssKrb5Server) offers as its maximum buffer size.
SERVER_MAX_BUFFER = 65536
_OFFER = struct.pack(">I", SERVER_MAX_BUFFER)[1:]
_CACHES = itertools.count(1)


class KerberosError(KafkaguardError):
    """A Kerberos or SASL/GSSAPI step failed; the message is GSSAPI's description or the protocol's, safe to log."""


def _gss_message(error: GSSError) -> str:
    try:
        return error.gen_message()
    except Exception:  # noqa: BLE001 - a status that cannot be described is still a failure to report
        return f"GSSAPI major status {error.maj_code}, minor status {error.min_code}"


def default_realm() -> str:
    """krb5.conf's ``default_realm``, or ``""`` without one: the realm Kafka's ``DEFAULT`` rule maps (Kafka reads it
    as ``new KerberosPrincipal("tmp").getRealm()``; here MIT Kerberos completes a name without realm the same way)."""
    import gssapi
    from gssapi.raw.misc import GSSError

    try:
        name = gssapi.Name("kafkaguard", gssapi.NameType.kerberos_principal).canonicalize(gssapi.MechType.kerberos)
    except GSSError:
        return ""
    return str(name).rpartition("@")[2] if "@" in str(name) else ""


class Acceptor:
    """The node's service principal (``<service>/<host>@REALM``) and its keytab, checked once at start."""

    def __init__(self, keytab: Path, principal: str) -> None:
        """:raises KerberosError: the keytab cannot be read or holds no key of ``principal``."""
        import gssapi
        from gssapi.raw.misc import GSSError

        if not os.access(keytab, os.R_OK):
            raise KerberosError(f"the keytab {keytab} cannot be read")
        self.principal = principal
        self._keytab = str(keytab)
        try:
            name = gssapi.Name(principal, gssapi.NameType.kerberos_principal)
            # MIT Kerberos checks here that the keytab holds a key of the principal: a node fails at start, not at
            # its first login
            self._credentials = gssapi.Credentials(name=name, usage="accept", store={"keytab": self._keytab})
        except GSSError as e:
            raise KerberosError(f"the keytab {keytab} has no usable key of {principal}: {_gss_message(e)}") from None

    def exchange(self) -> GssapiServerExchange:
        """A new server exchange for one login."""
        import gssapi

        return GssapiServerExchange(gssapi.SecurityContext(creds=self._credentials, usage="accept"))


class _ServerStage(Enum):
    CONTEXT = auto()
    OFFER = auto()  # the context is established; the client's empty token is next
    ANSWER = auto()  # the offer went out; the client's wrapped answer is next
    DONE = auto()


class GssapiServerExchange:
    """The server side of one SASL/GSSAPI exchange (see the module docstring). Not thread-safe: one step at a time,
    from any thread."""

    def __init__(self, context: gssapi.SecurityContext) -> None:
        self._context = context
        self._stage = _ServerStage.CONTEXT
        #: The authenticated client principal (``alice@EXAMPLE.COM``), once the context is established.
        self.peer: str | None = None

    @property
    def done(self) -> bool:
        return self._stage is _ServerStage.DONE

    def step(self, token: bytes) -> tuple[bytes, bool]:
        """Take the client's next token: (the token to send back, whether the exchange is done).

        :raises KerberosError: the token is refused (a bad or replayed ticket, a ticket for another service, a
            message out of order, a layer not offered).
        """
        from gssapi.raw.misc import GSSError

        try:
            return self._step(token)
        except GSSError as e:
            self._stage = _ServerStage.DONE
            raise KerberosError(_gss_message(e)) from None

    def _step(self, token: bytes) -> tuple[bytes, bool]:
        context = self._context
        stage = self._stage
        if stage is _ServerStage.CONTEXT:
            reply = context.step(token)
            if not context.complete:
                return reply or b"", False
            self.peer = str(context.initiator_name)
            self._stage = _ServerStage.OFFER
            if reply:
                return reply, False
            return self._offer(b"")
        if stage is _ServerStage.OFFER:
            return self._offer(token)
        if stage is _ServerStage.ANSWER:
            answer = context.unwrap(token).message
            self._stage = _ServerStage.DONE
            if len(answer) < 4:
                raise KerberosError("Invalid SASL/GSSAPI answer: shorter than 4 octets")
            if answer[0] != LAYER_NONE:  # the one layer offered
                raise KerberosError(f"Client selected unsupported protection: {answer[0]}")
            return b"", True
        raise KerberosError("Unexpected SASL/GSSAPI token: the exchange is over")

    def _offer(self, token: bytes) -> tuple[bytes, bool]:
        if token:
            self._stage = _ServerStage.DONE
            raise KerberosError("Handshake expecting no response data from client")
        self._stage = _ServerStage.ANSWER
        return self._context.wrap(bytes([LAYER_NONE]) + _OFFER, False).message, False


class Initiator:
    """A client principal's credentials from its keytab (the proxy's upstream login): MIT Kerberos gets and renews
    its ticket-granting ticket from the keytab by itself, into a credential cache in this process's memory."""

    def __init__(self, keytab: Path, principal: str) -> None:
        """:raises KerberosError: the keytab cannot be read."""
        import gssapi
        from gssapi.raw.misc import GSSError

        if not os.access(keytab, os.R_OK):
            raise KerberosError(f"the keytab {keytab} cannot be read")
        self.principal = principal
        store: dict[bytes | str, bytes | str] = {
            "client_keytab": str(keytab),
            "ccache": f"MEMORY:kafkaguard-{os.getpid()}-{next(_CACHES)}",
        }
        try:
            name = gssapi.Name(principal, gssapi.NameType.kerberos_principal)
            self._credentials = gssapi.Credentials(name=name, usage="initiate", store=store)
        except GSSError as e:
            raise KerberosError(f"no credentials of {principal} from {keytab}: {_gss_message(e)}") from None

    def exchange(self, service: str, host: str) -> GssapiClientExchange:
        """A new client exchange with the server ``<service>/<host>`` (its realm from krb5.conf's domain_realm or
        the default realm)."""
        return GssapiClientExchange(self._credentials, service, host)


class GssapiClientExchange:
    """The client side of one SASL/GSSAPI exchange (``first``, then ``step`` with each server token until it
    returns None). Its first step may ask the KDC for a service ticket: call it off the event loop."""

    def __init__(self, credentials: gssapi.Credentials, service: str, host: str) -> None:
        import gssapi

        target = gssapi.Name(f"{service}@{host}", gssapi.NameType.hostbased_service)
        flags = gssapi.RequirementFlag.mutual_authentication | gssapi.RequirementFlag.out_of_sequence_detection
        self._context = gssapi.SecurityContext(name=target, creds=credentials, usage="initiate", flags=flags)
        self._layers_done = False

    def first(self) -> bytes:
        """The initial token (an AP-REQ).

        :raises KerberosError: no service ticket could be had.
        """
        from gssapi.raw.misc import GSSError

        try:
            return self._context.step() or b""
        except GSSError as e:
            raise KerberosError(_gss_message(e)) from None

    def step(self, challenge: bytes) -> bytes | None:
        """The answer to the server's ``challenge``, or None when the exchange is over.

        :raises KerberosError: the server's token is refused, or it offers no layer Kafka's clients accept.
        """
        from gssapi.raw.misc import GSSError

        try:
            if not self._context.complete:
                return self._context.step(challenge) or b""
            if self._layers_done:
                if challenge:
                    raise KerberosError("Unexpected SASL/GSSAPI token after the exchange")
                return None
            offer = self._context.unwrap(challenge).message
            if len(offer) != 4 or offer[0] & LAYER_NONE == 0:
                raise KerberosError("the server offers no SASL/GSSAPI exchange without a security layer")
            self._layers_done = True
            return self._context.wrap(bytes([LAYER_NONE, 0, 0, 0]), False).message
        except GSSError as e:
            raise KerberosError(_gss_message(e)) from None
