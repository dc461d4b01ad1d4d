"""``kafkaguard whois``: an identity dry run — given a client certificate, an OAUTHBEARER token or a Kerberos
principal, the principal and groups kafkaguard derives for it under the configured rules, before any client tries.

Kafka derives the same principal from the same settings (kafkaguard implements its rules exactly:
``ssl.principal.mapping.rules`` over Java's RFC 2253 form of the subject, ``sasl.oauthbearer.sub.claim.name``,
``sasl.kerberos.principal.to.local.rules``), so the answer is also what a broker configured alike would log in
``kafka-authorizer.log``. Groups are the stored memberships of the principal (``kafkaguard groups``) and, for a
token, its groups claim (``sasl_oauthbearer_groups_claim_name``). A token's signature, audience and expiry are
not checked: this reads what a login would be named, not whether it would succeed.

Exit code 0 with the principal; 1 when no rule maps the identity (the login would be refused, as in Kafka); 2 for a
usage error.

Worked example — a certificate with subject ``CN=alice,OU=Payments,O=Example`` under the rules
``RULE:^CN=([^,]*),OU=([^,]*),.*$/$1@$2/L,DEFAULT``::

    $ kafkaguard whois --certificate alice.pem --config kafkaguard.yaml
    subject    CN=alice,OU=Payments,O=Example
    principal  User:alice@payments
    groups     Group:payments-readers (stored)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from kafkaguard.authorizer import parse_super_users
from kafkaguard.cli.groups import store_services
from kafkaguard.cli.output import fail
from kafkaguard.errors import KafkaguardError
from kafkaguard.identity.kerberos import default_realm
from kafkaguard.identity.kerberos_names import KerberosMappingError, KerberosName, KerberosShortNamer
from kafkaguard.identity.oauth import TokenExpectations, TokenRejected, accepted_token_claims
from kafkaguard.identity.ssl_mapping import PrincipalMappingError, SslPrincipalMapper
from kafkaguard.identity.x500 import rfc2253_name
from kafkaguard.model.json_value import JsonObject

_IDENTITY = "The identity (exactly one)"


def whois(
    certificate: Annotated[
        Path | None,
        typer.Option(
            "--certificate",
            help="A client certificate, PEM or DER.",
            exists=True,
            dir_okay=False,
            rich_help_panel=_IDENTITY,
        ),
    ] = None,
    token: Annotated[
        Path | None,
        typer.Option(
            "--token",
            help="A file holding an OAUTHBEARER access token (a JWT); - reads standard input.",
            allow_dash=True,
            rich_help_panel=_IDENTITY,
        ),
    ] = None,
    kerberos: Annotated[
        str | None,
        typer.Option(
            "--kerberos",
            help="A Kerberos principal, e.g. alice/host.example.com@EXAMPLE.COM.",
            rich_help_panel=_IDENTITY,
        ),
    ] = None,
    config: Annotated[Path | None, typer.Option(help="YAML config file (the mapping rules, claims, store).")] = None,
    data_dir: Annotated[Path | None, typer.Option(help="Data directory (overrides config).")] = None,
    output: Annotated[str, typer.Option("--output", help="text or json.")] = "text",
) -> None:
    """Which principal and groups a certificate, token or Kerberos principal logs in as (a dry run)."""  # fmt: skip
    given = [name for name, value in (("--certificate", certificate), ("--token", token), ("--kerberos", kerberos))
             if value is not None]  # fmt: skip
    if len(given) != 1:
        fail("name exactly one identity: --certificate FILE, --token FILE (or -) or --kerberos PRINCIPAL", 2)
    if output not in ("text", "json"):
        fail(f"--output must be text or json, not {output!r}", 2)
    with store_services(config, data_dir, quiet=True) as services:
        settings = services.settings
        try:
            if certificate is not None:
                facts = _certificate(certificate, settings.ssl_principal_mapping_rules)
            elif token is not None:
                facts = _token(token, settings.sasl_oauthbearer_sub_claim_name,
                               settings.sasl_oauthbearer_groups_claim_name)  # fmt: skip
            else:
                facts = _kerberos(str(kerberos), settings.sasl_kerberos_principal_to_local_rules)
        except _Unmapped as e:
            _answer({**e.facts, "principal": None, "refused": str(e)}, output)
            raise typer.Exit(1) from None
        principal = str(facts["principal"])
        stored = [f"Group:{group}" for group, members in services.groups.groups().items() if principal in members]
        claimed = facts.pop("claimed_groups", [])
        claims = (
            [f"Group:{g} (token claim)" for g in claimed if isinstance(g, str)] if isinstance(claimed, list) else []
        )
        facts["groups"] = [*(f"{g} (stored)" for g in stored), *claims]
        facts["super_user"] = principal in parse_super_users(settings.super_users)
    _answer(facts, output)


class _Unmapped(KafkaguardError):
    """No rule gives the identity a principal: the login would be refused."""

    def __init__(self, message: str, facts: JsonObject) -> None:
        super().__init__(message)
        self.facts = facts


def _certificate(path: Path, rules: str) -> JsonObject:
    data = path.read_bytes()
    try:
        der = x509.load_pem_x509_certificate(data).public_bytes(Encoding.DER) if b"-----BEGIN" in data else data
        subject = rfc2253_name(der)
    except ValueError as e:
        fail(f"{path} is not a certificate (PEM or DER): {e}", 2)
    facts: JsonObject = {"kind": "certificate", "subject": subject, "rules": rules}
    try:
        facts["principal"] = f"User:{SslPrincipalMapper.from_rules(rules).name_of(subject)}"
    except PrincipalMappingError as e:
        raise _Unmapped(f"ssl_principal_mapping_rules map no name for this subject: {e}", facts) from None
    return facts


def _token(path: Path, sub_claim: str, groups_claim: str | None) -> JsonObject:
    text = (sys.stdin.read() if str(path) == "-" else _read_token_file(path)).strip()
    facts: JsonObject = {"kind": "token", "sub_claim": sub_claim, "checked": "claims only (no signature, audience "
                         "or expiry check: the server checks those with its JWKS at login)"}  # fmt: skip
    try:
        name, groups = accepted_token_claims(text, TokenExpectations(sub_claim_name=sub_claim,
                                                                     groups_claim=groups_claim))  # fmt: skip
    except TokenRejected as e:  # its message never holds the token
        raise _Unmapped(f"the token gives no principal: {e}", facts) from None
    facts["principal"] = f"User:{name}"
    facts["claimed_groups"] = list(groups)
    return facts


def _read_token_file(path: Path) -> str:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        fail(f"cannot read the token file {path}: {e}", 2)


def _kerberos(principal: str, rules: list[str]) -> JsonObject:
    facts: JsonObject = {"kind": "kerberos", "kerberos_principal": principal, "rules": list(rules) or ["DEFAULT"]}
    try:
        namer = KerberosShortNamer.from_rules(default_realm(), list(rules))
        facts["principal"] = f"User:{namer.short_name(KerberosName.parse(principal))}"
    except KerberosMappingError as e:  # no rule applies, or not a Kerberos name at all
        raise _Unmapped(f"sasl_kerberos_principal_to_local_rules map no name for it: {e}", facts) from None
    return facts


def _answer(facts: JsonObject, output: str) -> None:
    if output == "json":
        typer.echo(json.dumps(facts, indent=2, sort_keys=True))
        return
    for key, value in facts.items():
        if key in ("kind", "claimed_groups"):
            continue
        if isinstance(value, list):
            value = ", ".join(str(v) for v in value) or "(none)"
        elif isinstance(value, bool):
            value = "yes" if value else "no"
        elif value is None:
            value = "(none: the login would be refused)"
        typer.echo(f"{key.replace('_', ' '):<20} {value}")
