"""The four SCRAM messages (RFC 5802 §7), parsed from and formatted to bytes. Pure: no I/O, no state, no crypto.

Every value is validated on construction, so a message object is always well-formed, and parsing is the exact
inverse of formatting: ``format_x(parse_x(data)) == data`` for every accepted ``data`` (usernames use only the
``=2C``/``=3D`` escapes, base64 must be canonical). The server relies on this: it rebuilds AuthMessage from the
parsed client-first-message-bare and client-final-message-without-proof.

Refused on purpose, each with a :class:`~kafkaguard.errors.ScramProtocolError` naming the reason:

* channel binding (gs2 flag ``p=…``): kafkaguard offers no ``-PLUS`` mechanisms, as Kafka offers none;
* ``tokenauth=true``: Kafka's delegation-token extension; kafkaguard has no delegation tokens;
* ``m=``: RFC 5802 reserves it for mandatory extensions a server must refuse if it does not know them;
* messages over :data:`MAX_MESSAGE_BYTES`, empty messages, invalid UTF-8.

Error messages never echo proofs, signatures or salts (the server's own messages are built from its own values).
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass, field

from kafkaguard.errors import ScramProtocolError

#: Longest SCRAM message accepted, in bytes. Real ones are 100 to 300 bytes; the cap bounds parsing work.
MAX_MESSAGE_BYTES = 4096

#: RFC 5802 ``printable``: %x21-2B / %x2D-7E, printable ASCII except ",".
_PRINTABLE = re.compile(r"[\x21-\x2b\x2d-\x7e]+")
#: RFC 5802 ``saslname``: UTF-8 except NUL, "=" and ",", which are written "=3D" and "=2C".
_SASLNAME = re.compile(r"(?:[^\x00=,]|=2C|=3D)+")
_SASLNAME_ESCAPE = re.compile(r"=(2C|3D)")
#: Extension names: RFC 5802 says one ALPHA; Kafka's own ``tokenauth`` is longer, so any run of letters.
_EXTENSION_NAME = re.compile(r"[A-Za-z]+")
#: RFC 5802 ``value``: UTF-8 except NUL and ",".
_VALUE = re.compile(r"[^\x00,]+")
_ITERATIONS = re.compile(r"[1-9][0-9]{0,9}")
#: Attribute letters RFC 5802 defines; an extension may not reuse one (``r=`` twice, a ``p=`` before the proof, …).
_RESERVED_NAMES = frozenset("acemnprsiv")

Extensions = tuple[tuple[str, str], ...]


def escape_saslname(name: str) -> str:
    """``=`` → ``=3D``, ``,`` → ``=2C`` (RFC 5802 §5.1). Example: ``a,b=c`` → ``a=2Cb=3Dc``."""
    return name.replace("=", "=3D").replace(",", "=2C")


def unescape_saslname(text: str, what: str = "user name") -> str:
    """The inverse of :func:`escape_saslname`.

    :raises ScramProtocolError: empty, a NUL or a bare ``,``, or ``=`` not followed by ``2C`` or ``3D``.
    """
    if not _SASLNAME.fullmatch(text):
        raise ScramProtocolError(
            f"Malformed SCRAM {what}: it must be non-empty, without NUL, with ',' written '=2C' and '=' written '=3D'"
        )
    return _SASLNAME_ESCAPE.sub(lambda match: "," if match.group(1) == "2C" else "=", text)


def encode_base64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def decode_base64(text: str, what: str) -> bytes:
    """Strict, canonical base64: only the standard alphabet, correct padding, and no stray bits in the last symbol
    (so one value has exactly one spelling, and a flipped character never decodes to the same bytes).

    :raises ScramProtocolError: anything else; the message names ``what`` but never echoes ``text``.
    """
    if not text.isascii():
        raise ScramProtocolError(f"Malformed SCRAM {what}: not valid base64")
    try:
        data = base64.b64decode(text, validate=True)
    except binascii.Error as error:  # its message never quotes the data
        raise ScramProtocolError(f"Malformed SCRAM {what}: not valid base64") from error
    if encode_base64(data) != text:
        raise ScramProtocolError(f"Malformed SCRAM {what}: not canonical base64")
    return data


def is_valid_nonce(nonce: str) -> bool:
    """RFC 5802 ``c-nonce``/``s-nonce``: non-empty printable ASCII (%x21-7E) without ","."""
    return _PRINTABLE.fullmatch(nonce) is not None


def _check_nonce(nonce: str, what: str) -> None:
    if not is_valid_nonce(nonce):
        raise ScramProtocolError(f"Malformed SCRAM {what}: it must be non-empty printable ASCII without ','")


def _check_extensions(extensions: Extensions) -> None:
    seen: set[str] = set()
    for name, value in extensions:
        if not _EXTENSION_NAME.fullmatch(name) or name in _RESERVED_NAMES:
            raise ScramProtocolError(
                "Malformed SCRAM extension: its name must be letters and not one of RFC 5802's attributes"
            )
        if name in seen:
            raise ScramProtocolError(f"Malformed SCRAM message: extension {name!r} appears twice")
        if not _VALUE.fullmatch(value):
            raise ScramProtocolError(f"Malformed SCRAM extension {name!r}: its value must be non-empty, without NUL")
        seen.add(name)


def _format_extensions(extensions: Extensions) -> str:
    return "".join(f",{name}={value}" for name, value in extensions)


def _decode(message: bytes, what: str) -> list[str]:
    """Size check, UTF-8 check, then the comma-separated attributes (commas never occur inside a value)."""
    if len(message) > MAX_MESSAGE_BYTES:
        raise ScramProtocolError(
            f"SCRAM {what} message is {len(message)} bytes long; at most {MAX_MESSAGE_BYTES} are accepted"
        )
    if not message:
        raise ScramProtocolError(f"SCRAM {what} message is empty")
    # Not raised inside the except clause: a UnicodeDecodeError holds the whole message (a client-final holds the
    # proof), and chaining it, even as __context__, would carry it into logs via the exception's repr.
    text: str | None
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is None:
        raise ScramProtocolError(f"SCRAM {what} message is not valid UTF-8")
    return text.split(",")


def _attribute(part: str, name: str, what: str) -> str:
    """The value of ``name=value``.

    :raises ScramProtocolError: ``part`` is not that attribute.
    """
    prefix = f"{name}="
    if not part.startswith(prefix):
        raise ScramProtocolError(f"Malformed SCRAM {what} message: expected attribute '{prefix}' here")
    return part[len(prefix) :]


def _parse_extensions(parts: list[str], what: str) -> Extensions:
    extensions: list[tuple[str, str]] = []
    for part in parts:
        name, equals, value = part.partition("=")
        if not equals:
            raise ScramProtocolError(f"Malformed SCRAM {what} message: an attribute without '='")
        extensions.append((name, value))
    result = tuple(extensions)
    _check_extensions(result)
    return result


def _refuse_mandatory_extension(parts: list[str], what: str) -> None:
    if parts and parts[0].startswith("m="):
        raise ScramProtocolError(f"SCRAM {what} message asks for a mandatory extension (m=), which is not supported")


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientFirstMessage:
    """``gs2-header client-first-message-bare``, e.g. ``n,,n=user,r=rOprNGfwEbeRWgbNEkqO``.

    ``gs2_flag`` is ``n`` (client does not support channel binding) or ``y`` (it does, but thinks the server does
    not); ``authzid`` is the optional ``a=`` authorization id, unescaped.
    """

    gs2_flag: str = "n"
    authzid: str | None = None
    username: str
    nonce: str
    extensions: Extensions = ()

    def __post_init__(self) -> None:
        if self.gs2_flag not in ("n", "y"):
            raise ScramProtocolError("SCRAM gs2 flag must be 'n' or 'y' (channel binding is not supported)")
        if self.authzid is not None and not self.authzid:
            raise ScramProtocolError("Malformed SCRAM authorization id: it must be non-empty when present")
        if not self.username:
            raise ScramProtocolError("Malformed SCRAM user name: it must be non-empty")
        if "\x00" in self.username or (self.authzid is not None and "\x00" in self.authzid):
            raise ScramProtocolError("Malformed SCRAM user name or authorization id: NUL is not allowed")
        _check_nonce(self.nonce, "client nonce")
        _check_extensions(self.extensions)

    @property
    def gs2_header(self) -> str:
        """``n,,`` / ``y,,`` / ``n,a=<escaped authzid>,``; its base64 is what client-final ``c=`` must carry."""
        authzid = "" if self.authzid is None else f"a={escape_saslname(self.authzid)}"
        return f"{self.gs2_flag},{authzid},"

    @property
    def bare(self) -> str:
        """client-first-message-bare, the first part of AuthMessage."""
        return f"n={escape_saslname(self.username)},r={self.nonce}{_format_extensions(self.extensions)}"

    @property
    def token_authentication(self) -> bool:
        """Kafka's ``tokenauth`` extension is true (case-insensitive, as Java's ``Boolean.parseBoolean``)."""
        return any(name == "tokenauth" and value.lower() == "true" for name, value in self.extensions)


def parse_client_first(message: bytes) -> ClientFirstMessage:
    """Parse a client-first message.

    :raises ScramProtocolError: malformed, too long, channel binding requested (``p=``), a mandatory extension,
        or ``tokenauth=true``.
    """
    what = "client-first"
    parts = _decode(message, what)
    if parts[0].startswith("p="):
        raise ScramProtocolError(
            "SCRAM channel binding (gs2 flag 'p=') is not supported: no SCRAM-*-PLUS mechanism is offered; "
            "send gs2 flag 'n'"
        )
    if parts[0] not in ("n", "y"):
        raise ScramProtocolError("Malformed SCRAM client-first message: it must start with gs2 flag 'n,' or 'y,'")
    if len(parts) < 4:
        raise ScramProtocolError("Malformed SCRAM client-first message: expected gs2 header, 'n=' and 'r='")
    authzid = unescape_saslname(_attribute(parts[1], "a", what), "authorization id") if parts[1] else None
    bare = parts[2:]
    _refuse_mandatory_extension(bare, what)
    client_first = ClientFirstMessage(
        gs2_flag=parts[0],
        authzid=authzid,
        username=unescape_saslname(_attribute(bare[0], "n", what)),
        nonce=_attribute(bare[1], "r", what),
        extensions=_parse_extensions(bare[2:], what),
    )
    if client_first.token_authentication:
        raise ScramProtocolError(
            "SCRAM extension tokenauth=true (delegation token authentication) is not supported by kafkaguard"
        )
    return client_first


def format_client_first(message: ClientFirstMessage) -> bytes:
    return (message.gs2_header + message.bare).encode("utf-8")


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerFirstMessage:
    """``r=<client nonce + server nonce>,s=<base64 salt>,i=<iterations>``. The salt is kept out of the repr."""

    nonce: str
    salt: bytes = field(repr=False)
    iterations: int
    extensions: Extensions = ()

    def __post_init__(self) -> None:
        _check_nonce(self.nonce, "nonce")
        if not self.salt:
            raise ScramProtocolError("Malformed SCRAM server-first message: the salt must be non-empty")
        if not 0 < self.iterations < 10**10:
            raise ScramProtocolError("Malformed SCRAM server-first message: iterations must be a positive integer")
        _check_extensions(self.extensions)

    @property
    def text(self) -> str:
        """server-first-message, the middle part of AuthMessage."""
        return f"r={self.nonce},s={encode_base64(self.salt)},i={self.iterations}{_format_extensions(self.extensions)}"


def parse_server_first(message: bytes) -> ServerFirstMessage:
    """:raises ScramProtocolError: malformed or too long."""
    what = "server-first"
    parts = _decode(message, what)
    _refuse_mandatory_extension(parts, what)
    if len(parts) < 3:
        raise ScramProtocolError("Malformed SCRAM server-first message: expected 'r=', 's=' and 'i='")
    iterations = _attribute(parts[2], "i", what)
    if not _ITERATIONS.fullmatch(iterations):
        raise ScramProtocolError("Malformed SCRAM server-first message: iterations must be a positive integer")
    return ServerFirstMessage(
        nonce=_attribute(parts[0], "r", what),
        salt=decode_base64(_attribute(parts[1], "s", what), "salt"),
        iterations=int(iterations),
        extensions=_parse_extensions(parts[3:], what),
    )


def format_server_first(message: ServerFirstMessage) -> bytes:
    return message.text.encode("utf-8")


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientFinalMessage:
    """``c=<base64 gs2 header>,r=<nonce>,p=<base64 proof>``. The proof is kept out of the repr."""

    channel_binding: bytes
    nonce: str
    extensions: Extensions = ()
    proof: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if not self.channel_binding:
            raise ScramProtocolError("Malformed SCRAM client-final message: the channel binding c= must be non-empty")
        _check_nonce(self.nonce, "nonce")
        _check_extensions(self.extensions)
        if not self.proof:
            raise ScramProtocolError("Malformed SCRAM client-final message: the proof p= must be non-empty")

    @property
    def without_proof(self) -> str:
        """client-final-message-without-proof, the last part of AuthMessage."""
        channel_binding = encode_base64(self.channel_binding)
        return f"c={channel_binding},r={self.nonce}{_format_extensions(self.extensions)}"


def parse_client_final(message: bytes) -> ClientFinalMessage:
    """:raises ScramProtocolError: malformed or too long (the proof must be the last attribute)."""
    what = "client-final"
    parts = _decode(message, what)
    if len(parts) < 3:
        raise ScramProtocolError("Malformed SCRAM client-final message: expected 'c=', 'r=' and 'p='")
    return ClientFinalMessage(
        channel_binding=decode_base64(_attribute(parts[0], "c", what), "channel binding"),
        nonce=_attribute(parts[1], "r", what),
        extensions=_parse_extensions(parts[2:-1], what),
        proof=decode_base64(_attribute(parts[-1], "p", what), "client proof"),
    )


def format_client_final(message: ClientFinalMessage) -> bytes:
    return f"{message.without_proof},p={encode_base64(message.proof)}".encode()


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerFinalMessage:
    """``v=<base64 server signature>`` or ``e=<server-error-value>``: exactly one of the two."""

    verifier: bytes | None = field(default=None, repr=False)
    error: str | None = None
    extensions: Extensions = ()

    def __post_init__(self) -> None:
        if (self.verifier is None) == (self.error is None):
            raise ScramProtocolError("A SCRAM server-final message carries exactly one of v= and e=")
        if self.verifier is not None and not self.verifier:
            raise ScramProtocolError("Malformed SCRAM server-final message: the verifier v= must be non-empty")
        if self.error is not None and not _VALUE.fullmatch(self.error):
            raise ScramProtocolError("Malformed SCRAM server-final message: e= must be non-empty, without ',' or NUL")
        _check_extensions(self.extensions)


def parse_server_final(message: bytes) -> ServerFinalMessage:
    """:raises ScramProtocolError: malformed or too long."""
    what = "server-final"
    parts = _decode(message, what)
    extensions = _parse_extensions(parts[1:], what)
    if parts[0].startswith("e="):
        return ServerFinalMessage(error=parts[0][2:], extensions=extensions)
    verifier = decode_base64(_attribute(parts[0], "v", what), "server signature")
    return ServerFinalMessage(verifier=verifier, extensions=extensions)


def format_server_final(message: ServerFinalMessage) -> bytes:
    first = f"e={message.error}" if message.verifier is None else f"v={encode_base64(message.verifier)}"
    return (first + _format_extensions(message.extensions)).encode("utf-8")
