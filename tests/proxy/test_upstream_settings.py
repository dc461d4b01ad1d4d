"""The upstream identity settings: what goes together is checked when the settings load (one clear message each),
and ``proxy.app.upstream_security`` builds the login from them, secrets read from their variable or file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kafkaguard.config import load_settings
from kafkaguard.config.sections import ProxySettings
from kafkaguard.errors import InvalidConfigError
from kafkaguard.proxy.app import upstream_security
from kafkaguard.proxy.upstream import OAuthBearerLogin
from kafkaguard.proxy.upstream_tokens import AccessTokenSource
from tests.kafka.pki import CertificateAuthority

OAUTH = {
    "upstream": "kafka:9093",
    "upstream_security_protocol": "SASL_SSL",
    "upstream_sasl_mechanism": "OAUTHBEARER",
    "upstream_sasl_oauthbearer_token_endpoint_url": "https://idp.example/token",
    "upstream_sasl_oauthbearer_client_id": "kafkaguard-proxy",
    "upstream_sasl_oauthbearer_client_secret": "the-client-secret",
}


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"upstream_security_protocol": "SSL"}, "OAUTHBEARER needs upstream_security_protocol SASL_PLAINTEXT or "),
        ({"upstream_sasl_oauthbearer_token_endpoint_url": None}, "needs upstream_sasl_oauthbearer_token_endpoint_url"),
        ({"upstream_sasl_oauthbearer_client_id": None}, "needs upstream_sasl_oauthbearer_client_id"),
        ({"upstream_sasl_oauthbearer_client_secret": None}, "needs a client secret"),
        ({"upstream_sasl_oauthbearer_token_endpoint_url": "ftp://idp/token"}, "is not https://… or http://…"),
        ({"upstream_sasl_oauthbearer_client_secret_file": "secret.txt"}, "give the OAuth client secret once"),
        ({"upstream_ssl_certfile": "proxy.pem"}, "upstream_ssl_certfile and upstream_ssl_keyfile go together"),
        ({"upstream_security_protocol": "SASL_PLAINTEXT", "upstream_ssl_certfile": "p.pem",
          "upstream_ssl_keyfile": "p.key"}, "upstream_ssl_certfile needs upstream_security_protocol SSL or SASL_SSL"),
    ],
)  # fmt: skip
def test_settings_that_go_together_are_checked(tmp_path: Path, changes: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidConfigError, match=message) as failure:
        load_settings(None, data_dir=tmp_path, **(OAUTH | changes))
    assert "the-client-secret" not in str(failure.value)


def test_oauthbearer_settings_make_a_token_source_with_the_secret_from_its_file(tmp_path: Path) -> None:
    secret_file = tmp_path / "secret.txt"
    secret_file.write_text("from-the-file\n")
    settings = load_settings(None, data_dir=tmp_path, **(OAUTH | {"upstream_sasl_oauthbearer_client_secret": None,
                             "upstream_sasl_oauthbearer_client_secret_file": secret_file}))  # fmt: skip
    assert settings.upstream_sasl_oauthbearer_secret == "from-the-file"  # noqa: S105 - the test's secret
    security = upstream_security(ProxySettings.of(settings))
    assert isinstance(security.login, OAuthBearerLogin) and isinstance(security.login.tokens, AccessTokenSource)
    assert security.login.mechanism_name == "OAUTHBEARER"
    assert "from-the-file" not in repr(security)


def test_a_client_certificate_is_loaded_and_a_key_not_its_own_refused(tmp_path: Path) -> None:
    certfile, keyfile = CertificateAuthority.create().issue("CN=kafkaguard-proxy").write(tmp_path, "proxy")
    mtls = {"upstream": "kafka:9093", "upstream_security_protocol": "SSL", "upstream_ssl_certfile": certfile,
            "upstream_ssl_keyfile": keyfile}  # fmt: skip
    security = upstream_security(ProxySettings.of(load_settings(None, data_dir=tmp_path, **mtls)))
    assert security.tls is not None and security.login is None
    other = CertificateAuthority.create().issue("CN=other").write(tmp_path, "other")[1]
    with pytest.raises(InvalidConfigError, match="cannot load upstream_ssl_certfile"):
        upstream_security(
            ProxySettings.of(load_settings(None, data_dir=tmp_path, **(mtls | {"upstream_ssl_keyfile": other})))
        )
