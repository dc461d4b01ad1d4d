"""What each listener offers, said once at start: one line per bound listener, and a warning for what is configured
but withheld there.

A newcomer who configured PLAIN on a SASL_PLAINTEXT listener saw the server start silently and the client told only
"Unsupported SASL mechanism" (PLAIN is offered only with TLS unless ``sasl_plain_without_tls``). Now the start says
it, and so does the refused handshake (``IdentitySettings.withheld_mechanisms``, ``protocol.sasl``)::

    listening on SASL_PLAINTEXT://127.0.0.1:9092: SASL SCRAM-SHA-256, SCRAM-SHA-512
    PLAIN is in sasl_mechanisms but not offered on SASL_PLAINTEXT://127.0.0.1:9092: …
    listening on SSL://127.0.0.1:9093: TLS, client certificate required, principal by ssl_principal_mapping_rules
    DEFAULT

Cost: a few string joins per listener, once.
"""

from __future__ import annotations

from kafkaguard.config import Listener, SecurityProtocol
from kafkaguard.config.sections import Sections


def listener_summary(listener: Listener, bound_port: int, sections: Sections) -> tuple[str, list[str]]:
    """The start-up line for ``listener`` bound on ``bound_port``, and its warnings."""
    listening, identity = sections.listening, sections.identity
    protocol = listener.protocol
    parts: list[str] = []
    if protocol.uses_tls:
        auth = listening.ssl_client_auth if protocol is SecurityProtocol.SSL else listening.sasl_ssl_client_auth
        tls = "TLS" if auth == "none" else f"TLS, client certificate {auth}"
        if protocol is SecurityProtocol.SSL:
            rules = identity.ssl_principal_mapping_rules
            tls += f", principal by ssl_principal_mapping_rules {rules}" if auth != "none" else ", User:ANONYMOUS"
        parts.append(tls)
    if protocol.uses_sasl:
        parts.append("SASL " + (", ".join(identity.listener_mechanisms(listener)) or "none"))
    if protocol is SecurityProtocol.PLAINTEXT:
        parts.append("no login: every client is User:ANONYMOUS")
    if listening.proxy_protocol != "off":
        parts.append(f"PROXY protocol {listening.proxy_protocol} from {', '.join(listening.trusted_proxies)}")
    line = f"listening on {protocol.value}://{listener.host}:{bound_port}: {'; '.join(parts)}"
    warnings = list(identity.withheld_mechanisms(listener).values()) if protocol.uses_sasl else []
    return line, warnings
