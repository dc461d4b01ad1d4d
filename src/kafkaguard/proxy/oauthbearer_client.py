"""The client side of SASL/OAUTHBEARER (RFC 7628) as Kafka's client speaks it: the messages, I/O-free — the proxy's
login upstream (``upstream``; its tokens from ``upstream_tokens``). The server side is ``identity.oauthbearer``.

::

    send(oauthbearer_initial_response(token))          # b"n,,\\x01auth=Bearer <token>\\x01\\x01"
    # accepted: an empty answer. Refused: an error challenge, a JSON document ({"status":"invalid_token"});
    send(OAUTHBEARER_ERROR_ACKNOWLEDGEMENT)           # then the server fails the exchange with its message
"""

from __future__ import annotations

import json

OAUTHBEARER = "OAUTHBEARER"


def oauthbearer_initial_response(token: str) -> bytes:
    """The client's first OAUTHBEARER message (RFC 7628 §3.1; no authzid, no extensions), as Kafka's client sends
    it: ``n,,\\x01auth=Bearer <token>\\x01\\x01``."""
    return f"n,,\x01auth=Bearer {token}\x01\x01".encode()


#: The client's answer to the server's error challenge (RFC 7628 §3.2.3): the server then ends the exchange failed.
OAUTHBEARER_ERROR_ACKNOWLEDGEMENT = b"\x01"


def oauthbearer_error_status(challenge: bytes) -> str:
    """The ``status`` of a server's OAUTHBEARER error challenge (RFC 7628 §3.2.2, a JSON document such as Kafka's
    ``{"status":"invalid_token"}``), or the challenge cut short when it is not one."""
    try:
        document = json.loads(challenge)
    except ValueError:
        document = None
    if isinstance(document, dict) and isinstance(document.get("status"), str):
        return str(document["status"])[:100]
    return repr(challenge[:100])
