"""A real Kafka broker with identity listeners (``broker.TlsIdentity``) and what its clients need: the CA, client
certificates, the JWKS signing key. ``tests/kafka/conftest.py`` starts one per session (``identity_kafka``).

Its settings, for tests that compare with it:

* MTLS (SSL, client certificate required), ``ssl.principal.mapping.rules`` = ``MAPPING_RULES``: a subject
  ``CN=Alice,OU=kafkaguard,O=Example`` is ``User:alice``; a subject without ``OU=kafkaguard`` keeps its DEFAULT
  form (``User:CN=Bob,O=Other``);
* OAUTH (SASL_SSL, OAUTHBEARER): tokens signed by ``signing_key`` (kid ``KEY_ID``) with ``aud`` ``AUDIENCE`` and
  ``iss`` ``ISSUER``; the principal is ``User:`` + ``sub``;
* super users: ``User:admin`` (SASL_PLAINTEXT, SCRAM, for ACLs) and ``User:kafkaguard-proxy`` (``PROXY_PRINCIPAL``:
  the client certificate ``PROXY_SUBJECT`` and the OAuth client ``PROXY_PRINCIPAL`` both map to it).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.kafka.broker import ClientConfig, KafkaBroker, OAuthBearerValidation, TlsIdentity
from tests.kafka.pki import CertificateAuthority
from tests.kafka.tokens import SigningKey, write_jwks

MAPPING_RULES = "RULE:^CN=([^,]*),OU=kafkaguard,.*$/$1/L,DEFAULT"
KEY_ID = "kafkaguard-test-key"
AUDIENCE = "kafka"
ISSUER = "https://issuer.kafkaguard.test"
PROXY_PRINCIPAL = "kafkaguard-proxy"
PROXY_SUBJECT = "CN=kafkaguard-proxy,OU=kafkaguard,O=Example"


@dataclass
class IdentityKafka:
    broker: KafkaBroker
    ca: CertificateAuthority
    signing_key: SigningKey
    directory: Path

    @property
    def ca_file(self) -> Path:
        return self.directory / "ca.pem"

    def client_certificate(self, subject: str, name: str) -> tuple[Path, Path]:
        """(certfile, keyfile) of a new client certificate for ``subject``, signed by the broker's CA."""
        return self.ca.issue(subject).write(self.directory, name)

    def token(self, subject: str, **claims: Any) -> str:
        """A token the OAUTH listener accepts (unless ``claims`` break it)."""
        return self.signing_key.sign(subject, **({"aud": AUDIENCE, "iss": ISSUER} | claims))

    def token_claims(self) -> dict[str, Any]:
        """The claims besides sub/iat/exp that the OAUTH listener expects (for a ``TokenEndpoint``)."""
        return {"aud": AUDIENCE, "iss": ISSUER}

    def ssl_config(self, certfile: Path, keyfile: Path) -> ClientConfig:
        """confluent-kafka's configuration for the MTLS listener with this client certificate."""
        return {"bootstrap.servers": self.broker.mtls_bootstrap, "security.protocol": "SSL",
                "ssl.ca.location": str(self.ca_file), "ssl.certificate.location": str(certfile),
                "ssl.key.location": str(keyfile)}  # fmt: skip


def start_identity_kafka(home: Path, directory: Path) -> IdentityKafka:
    """Make the CA, server certificate and JWKS in ``directory`` and start the broker (see the module docstring)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = CertificateAuthority.create()
    ca.write(directory)
    server = ca.issue("CN=kafka-broker", hosts=("127.0.0.1", "localhost"))
    signing_key = SigningKey.create(KEY_ID)
    jwks = write_jwks(directory / "jwks.json", [signing_key])
    identity = TlsIdentity(
        ca_pem=ca.certificate_pem,
        server_certificate_pem=server.certificate_pem,
        server_key_pem=server.key_pem,
        principal_mapping_rules=MAPPING_RULES,
        oauth=OAuthBearerValidation(jwks, expected_audience=(AUDIENCE,), expected_issuer=ISSUER),
    )
    broker = KafkaBroker(home, directory / "broker", identity=identity,
                         extra_super_users=(f"User:{PROXY_PRINCIPAL}",))  # fmt: skip
    broker.start()
    return IdentityKafka(broker, ca, signing_key, directory)
