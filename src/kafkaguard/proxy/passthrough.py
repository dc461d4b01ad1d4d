"""Where ``upstream_authentication: passthrough`` cannot work, said at start (``app.ProxyServer``).

In passthrough each client's SCRAM or PLAIN login is relayed to the broker its connection is for, on that
connection's own upstream connection (``protocol.passthrough``, ``upstream.UpstreamConnection.relay_login``), so:

* every client listener must carry a SASL login to relay: an SSL (mTLS) client proves who it is with a certificate
  whose key the proxy does not have, and a PLAINTEXT client proves nothing;
* the upstream must be reached over SASL (SASL_PLAINTEXT or SASL_SSL), and the service account's login stays, for
  what the proxy asks itself (discovery, broker settings, topic ids);
* only SCRAM-SHA-256, SCRAM-SHA-512, PLAIN and OAUTHBEARER pass through, and at least one of them must be enabled;
* the broker must enable each mechanism passed through: asked from its answer to the service login's SaslHandshake
  (``unsupported_by_broker``);
* OAUTHBEARER: the broker must name principals by the claim kafkaguard reads (``sasl_oauthbearer_sub_claim_name``
  equal to the broker's ``sasl.oauthbearer.sub.claim.name``, asked by DescribeConfigs with the service account of
  the broker that answered discovery; ``sub_claim_disagreement``), or kafkaguard's ACLs and audit trail would name
  someone other than the broker's principal.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kafkaguard.config import SecurityProtocol
from kafkaguard.config.sections import Sections
from kafkaguard.protocol.passthrough import PASSTHROUGH_MECHANISMS

#: The broker's setting naming an OAUTHBEARER principal's claim, and Kafka's default for it.
BROKER_SUB_CLAIM_KEY = "sasl.oauthbearer.sub.claim.name"
KAFKA_SUB_CLAIM_DEFAULT = "sub"


def passed_mechanisms(sections: Sections) -> list[str]:
    """The mechanisms whose logins pass through: those of ``upstream_passthrough_mechanisms`` a listener enables."""
    listeners, identity = sections.listening.listeners, sections.identity
    enabled = {name for listener in listeners for name in identity.listener_mechanisms(listener)}
    return [name for name in sections.proxy.passthrough_mechanisms if name in enabled]


def passthrough_problem(sections: Sections) -> str | None:
    """Why ``upstream_authentication: passthrough`` cannot work with these settings, or None (also without it)."""
    proxy = sections.proxy
    if proxy.authentication != "passthrough":
        return None
    cannot = sorted(set(proxy.passthrough_mechanisms) - PASSTHROUGH_MECHANISMS)
    if cannot:
        return (
            f"upstream_passthrough_mechanisms: {', '.join(cannot)} cannot be passed through (only "
            f"{', '.join(sorted(PASSTHROUGH_MECHANISMS))})"
        )
    for listener in sections.listening.listeners:
        if not listener.protocol.uses_sasl:
            why = (
                "its clients prove who they are with a certificate, which the proxy cannot present to the broker"
                if listener.protocol is SecurityProtocol.SSL
                else "its clients do not log in"
            )
            return (
                f"upstream_authentication passthrough relays SASL logins, and listener {listener} has none: "
                f"{why}; use SASL_PLAINTEXT or SASL_SSL listeners"
            )
    if not SecurityProtocol(proxy.security_protocol).uses_sasl:
        return (
            f"upstream_authentication passthrough relays logins to the broker over SASL, so "
            f"upstream_security_protocol must be SASL_PLAINTEXT or SASL_SSL, not "
            f"{proxy.security_protocol}"
        )
    if not passed_mechanisms(sections):
        return (
            f"upstream_authentication passthrough: no listener enables any of upstream_passthrough_mechanisms "
            f"({', '.join(proxy.passthrough_mechanisms) or 'none'})"
        )
    return None


def unsupported_by_broker(sections: Sections, offered: Iterable[str]) -> str | None:
    """Why the broker cannot take the logins passed through, given the mechanisms its SaslHandshake answer offers."""
    offered = tuple(offered)
    missing = [name for name in passed_mechanisms(sections) if name not in offered]
    if not missing:
        return None
    return (
        f"upstream_authentication passthrough: the broker does not enable {', '.join(missing)} (it offers "
        f"{', '.join(offered) or 'none'}); enable it there (sasl.enabled.mechanisms) or leave it out of "
        f"upstream_passthrough_mechanisms"
    )


def passes_oauthbearer(sections: Sections) -> bool:
    """Whether OAUTHBEARER logins pass through (the start then checks the broker's sub claim)."""
    return sections.proxy.authentication == "passthrough" and "OAUTHBEARER" in passed_mechanisms(sections)


def sub_claim_disagreement(sections: Sections, broker: Mapping[str, str | None], node_id: int) -> str | None:
    """Why the broker's principals of OAUTHBEARER logins would not be kafkaguard's, given node ``node_id``'s configs
    (its DescribeConfigs answer for ``BROKER_SUB_CLAIM_KEY``), or None when both read the same claim."""
    theirs = broker.get(BROKER_SUB_CLAIM_KEY) or KAFKA_SUB_CLAIM_DEFAULT
    ours = sections.proxy.passthrough_sub_claim_name
    if theirs == ours:
        return None
    return (
        f"upstream_authentication passthrough: OAUTHBEARER principals would differ: broker {node_id} names them by "
        f"the token's {theirs!r} claim ({BROKER_SUB_CLAIM_KEY}), kafkaguard by {ours!r} "
        f"(sasl_oauthbearer_sub_claim_name); set sasl_oauthbearer_sub_claim_name: {theirs}"
    )
