"""``kafkaguard whois``: the principal and groups a certificate, token or Kerberos principal logs in as, under the
configured rules (issue 40's identity dry run). The certificates are real (``tests.identity.certs``: the subjects the
Kafka differential holds kafkaguard's RFC 2253 names and mapping to); a store's group membership is real too."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from kafkaguard.cli.main import app
from tests.identity.certs import CertificateSet, write_certificates


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> CertificateSet:
    return write_certificates(tmp_path_factory.mktemp("whois-certs"))


def whois(tmp_path: Path, config: str, *args: str) -> Result:
    path = tmp_path / "kafkaguard.yaml"
    path.write_text(f"data_dir: {tmp_path / 'data'}\n{config}")
    return CliRunner().invoke(app, ["whois", "--config", str(path), *args])


def unsigned_token(claims: dict[str, object]) -> str:
    def part(value: object) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'RS256', 'kid': 'k1'})}.{part(claims)}.c2lnbmF0dXJl"


RULES = 'ssl_principal_mapping_rules: "RULE:^CN=([^,]*),O=.*$/$1/L,DEFAULT"\n'


def test_a_certificate_is_named_by_the_first_rule_that_maps_its_subject(tmp_path: Path, certs: CertificateSet):
    result = whois(tmp_path, RULES, "--certificate", str(certs.clients["rfc2253_example"].cert), "--output", "json")
    assert result.exit_code == 0, result.output
    facts = json.loads(result.stdout)
    assert facts["subject"] == "CN=L. Eagle,O=Sue\\, Grabbit and Runn,C=GB"  # Java's RFC 2253 form
    assert facts["principal"] == "User:l. eagle"  # the rule's /L: lower case
    assert facts["groups"] == [] and facts["super_user"] is False


def test_an_unmapped_subject_is_a_refused_login(tmp_path: Path, certs: CertificateSet):
    result = whois(tmp_path, 'ssl_principal_mapping_rules: "RULE:^CN=(svc-[^,]*)$/$1/"\n',
                   "--certificate", str(certs.clients["rfc2253_example"].cert))  # fmt: skip
    assert result.exit_code == 1
    assert "principal            (none: the login would be refused)" in result.stdout
    assert "map no name for this subject" in result.stdout


def test_a_token_gives_its_sub_claim_and_its_groups_claim_with_the_stored_groups(tmp_path: Path):
    config = "sasl_oauthbearer_sub_claim_name: azp\nsasl_oauthbearer_groups_claim_name: roles\n"
    token = tmp_path / "token.jwt"
    token.write_text(unsigned_token({"sub": "ignored", "azp": "payments-app", "roles": ["writers"]}) + "\n")
    data_dir = tmp_path / "data"
    added = CliRunner().invoke(app, ["groups", "add", "auditors", "User:payments-app", "--data-dir", str(data_dir)])
    assert added.exit_code == 0, added.output
    result = whois(tmp_path, config, "--token", str(token))
    assert result.exit_code == 0, result.output
    lines = dict(line.split(None, 1) for line in result.stdout.splitlines() if not line.startswith(("sub ", "checked")))
    assert lines["principal"] == "User:payments-app"
    assert lines["groups"] == "Group:auditors (stored), Group:writers (token claim)"
    assert token.read_text().strip() not in result.stdout  # the token itself is never printed


def test_a_kerberos_principal_is_shortened_by_the_rules(tmp_path: Path):
    config = 'sasl_kerberos_principal_to_local_rules: ["RULE:[2:$1@$0](kafka@EXAMPLE.COM)s/@.*//L", "DEFAULT"]\n'
    lower = whois(tmp_path, config, "--kerberos", "kafka/broker1.example.com@EXAMPLE.COM", "--output", "json")
    assert lower.exit_code == 0, lower.output
    assert json.loads(lower.stdout)["principal"] == "User:kafka"
    # the rule's pattern is case-sensitive, as Kafka's, and DEFAULT maps only the default realm's names: refused
    upper = whois(tmp_path, config, "--kerberos", "Kafka/broker1.example.com@EXAMPLE.COM", "--output", "json")
    assert upper.exit_code == 1
    assert json.loads(upper.stdout)["principal"] is None


def test_exactly_one_identity_is_asked_for(tmp_path: Path):
    result = whois(tmp_path, "", "--kerberos", "a@B", "--token", "-")
    assert result.exit_code == 2
    assert "name exactly one identity" in result.output
