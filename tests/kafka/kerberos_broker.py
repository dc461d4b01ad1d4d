"""A real Kafka broker with a Kerberos listener, for ``test_kerberos_kafka.py``: ``KafkaBroker`` (its SASL_PLAINTEXT
SCRAM listener stays, with its admin) plus ``KRB`` (SASL_PLAINTEXT, GSSAPI only) on ``krb_port``, advertised as
``localhost`` (the host every Kerberos client here names: ``tests.kerberos``). The broker accepts tickets with the
keytab of ``kafka/localhost@KAFKAGUARD.TEST`` (JAAS ``Krb5LoginModule`` with ``useKeyTab``), maps principals with
``sasl.kerberos.principal.to.local.rules`` = ``tests.kerberos.RULES``, and finds the test's KDC through
``-Djava.security.krb5.conf``."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tests.kafka.broker import LOOPBACK, KafkaBroker, free_port
from tests.kerberos import RULES, SERVICE, SERVICE_HOST, SERVICE_PRINCIPAL, Kdc


@dataclass
class KerberosKafka(KafkaBroker):
    kdc: Kdc | None = None
    krb_port: int = field(default_factory=free_port)

    @property
    def krb_bootstrap(self) -> str:
        return f"{SERVICE_HOST}:{self.krb_port}"

    def jvm_options(self) -> list[str]:
        assert self.kdc is not None
        return [*super().jvm_options(), f"-Djava.security.krb5.conf={self.kdc.krb5_conf}"]

    def _write_config(self) -> Path:
        """``KafkaBroker``'s configuration with the KRB listener added to its listener lines."""
        assert self.kdc is not None
        properties = super()._write_config()
        jaas = (
            "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true "
            f'keyTab="{self.kdc.service_keytab}" principal="{SERVICE_PRINCIPAL}";'
        )
        lines = []
        for line in properties.read_text().splitlines():
            if line.startswith("listeners="):
                line += f",KRB://{LOOPBACK}:{self.krb_port}"
            elif line.startswith("advertised.listeners="):
                line += f",KRB://{SERVICE_HOST}:{self.krb_port}"
            elif line.startswith("listener.security.protocol.map="):
                line += ",KRB:SASL_PLAINTEXT"
            lines.append(line)
        lines += [
            "listener.name.krb.sasl.enabled.mechanisms=GSSAPI",
            f"listener.name.krb.gssapi.sasl.jaas.config={jaas}",
            f"sasl.kerberos.service.name={SERVICE}",
            f"sasl.kerberos.principal.to.local.rules={','.join(RULES)}",
        ]
        properties.write_text("\n".join([*lines, ""]))
        return properties
