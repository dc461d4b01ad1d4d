"""How large a frame may be before the client has logged in on a SASL listener, per API.

Before login only ApiVersions, SaslHandshake and SaslAuthenticate are answered (a v0 handshake's raw tokens come
without a header), and real clients send them small. Measured: the frames of one SCRAM login, in bytes, with each
client's default client id, seen by a recording relay in front of ``serve`` (the end-to-end tests log in with each of
these clients under the limits below):

============================  ===========  =============  ===================================
client                        ApiVersions  SaslHandshake  SaslAuthenticate (first, final)
============================  ===========  =============  ===================================
confluent-kafka (librdkafka)  64           32             66, 141 (SHA-256) / 185 (SHA-512)
kafka-python                  51           44             77, 197
aiokafka                      25           40             74, 193
Kafka 3.9 Java AdminClient    10, 49       25             51, 171
============================  ===========  =============  ===================================

Each grows with the client id (every header carries it) and SaslAuthenticate with the user name. The limits:

* ApiVersions, SaslHandshake (and any other API, which is refused after its header anyway): ``HANDSHAKE_FRAME_BYTES``,
  1 KiB: 16 times the largest seen, room for a client id of 900 bytes;
* SaslAuthenticate, and a raw token after a v0 handshake: ``max_unauthenticated_request_bytes``, 16 KiB by default.
  A SCRAM message is at most 4 KiB (``scram.messages.MAX_MESSAGE_BYTES``) plus a header; the rest is room for an
  OAUTHBEARER token once one is offered (JWTs of 1–8 KiB are common; raise the setting for larger ones).

What it bounds: a frame is read whole before anything of its body is refused, so the work and memory one unauthenticated
frame can cost grow with its size. At 512 KiB (the former limit, Kafka's sasl.server.max.receive.size) one ApiVersions
frame of empty tagged fields cost a large fraction of a second of CPU (see docs/benchmarks.md, "Figures from the code")
and 1,000 parked frames over 500 MiB; at 1 KiB the same frame costs 512 times less, and 1,000 parked SASL frames at most
16 MiB.
"""

from __future__ import annotations

from kafkaguard.authorizer.requests import ApiKey

#: The largest ApiVersions or SaslHandshake frame before login (and of any other API, refused after its header).
HANDSHAKE_FRAME_BYTES = 1024


def pre_login_limit(api_key: int, token_bytes: int) -> int:
    """The largest frame of ``api_key`` accepted before login; ``token_bytes`` is the SASL token frame limit
    (``Settings.max_unauthenticated_request_bytes``), which also caps the others."""
    if api_key == ApiKey.SASL_AUTHENTICATE:
        return token_bytes
    return min(HANDSHAKE_FRAME_BYTES, token_bytes)
