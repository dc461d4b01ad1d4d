"""Settings: the connection limits read the same from flags, the environment and the YAML file, and bad values are
refused with what to write instead."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kafkaguard.cli.main import app
from kafkaguard.config import load_settings
from kafkaguard.errors import InvalidConfigError

LISTENERS = ["SASL_PLAINTEXT://0.0.0.0:9092", "SASL_SSL://[::]:9093"]


def test_defaults_are_kafkas_limits_made_finite():
    settings = load_settings(None)
    assert settings.max_connections == 10_000
    assert settings.max_connections_per_ip == 500
    assert settings.max_connections_per_ip_overrides == {}
    assert settings.max_connections_per_listener == {}
    assert settings.max_connection_creation_rate_per_ip == 100.0
    assert settings.sasl_login_timeout_seconds == 10.0
    assert settings.max_unauthenticated_request_bytes == 16 * 1024


def test_kafkas_override_syntax_with_cidr_blocks_and_ipv6():
    settings = load_settings(
        None, max_connections_per_ip_overrides="10.0.0.7:2000, 10.1.0.0/16:50,[::1]:4,2001:db8::/32:9"
    )
    assert settings.max_connections_per_ip_overrides == {
        "10.0.0.7": 2000,
        "10.1.0.0/16": 50,
        "0:0:0:0:0:0:0:1": 4,  # an address in the form the server names its clients
        "2001:db8::/32": 9,
    }


def test_the_same_limits_from_flags_environment_and_yaml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from_flags = load_settings(
        None,
        listeners=LISTENERS,
        max_connections_per_listener=["SASL_SSL://[::]:9093=8000"],  # a repeatable flag's values
        max_connections_per_ip_overrides="127.0.0.2:7",
    )
    config = tmp_path / "kafkaguard.yaml"
    config.write_text(
        "listeners: ['SASL_PLAINTEXT://0.0.0.0:9092', 'SASL_SSL://[::]:9093']\n"
        "max_connections_per_listener:\n  SASL_SSL://[::]:9093: 8000\n"
        "max_connections_per_ip_overrides:\n  127.0.0.2: 7\n"
    )
    from_file = load_settings(config)
    monkeypatch.setenv("KAFKAGUARD_MAX_CONNECTIONS_PER_LISTENER", "SASL_SSL://[::]:9093=8000")
    monkeypatch.setenv("KAFKAGUARD_MAX_CONNECTIONS_PER_IP_OVERRIDES", "127.0.0.2:7")
    from_environment = load_settings(None, listeners=LISTENERS)
    for settings in (from_flags, from_file, from_environment):
        assert settings.max_connections_per_listener == {"SASL_SSL://[::]:9093": 8000}
        assert settings.max_connections_per_ip_overrides == {"127.0.0.2": 7}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"max_connections_per_ip_overrides": "kafka-1.example:3"}, "not an IP address or a CIDR block"),
        ({"max_connections_per_ip_overrides": "10.0.0.1"}, "is not KEY:COUNT; for example 10.0.0.7:2000"),
        ({"max_connections_per_ip_overrides": "10.0.0.0/33:3"}, "prefix length 33 is out of range"),
        ({"max_connections_per_ip_overrides": {"10.0.0.1": -1}}, "count -1 is below 0"),
        ({"max_connections_per_listener": "SASL_PLAINTEXT://0.0.0.0:9999=5"}, "which is not a listener"),
        ({"max_connections_per_listener": "SASL_PLAINTEXT://0.0.0.0:9092"}, "is not KEY=COUNT"),
        ({"max_connections_per_listener": "SASL_PLAINTEXT://0.0.0.0:9092=0"}, "would refuse every connection"),
        ({"max_connections_per_ip": 0}, "admits only the addresses of max_connections_per_ip_overrides"),
        ({"sasl_login_timeout_seconds": 0}, "sasl_login_timeout_seconds"),
        ({"max_connection_creation_rate_per_ip": 0}, "max_connection_creation_rate_per_ip"),
        ({"shutdown_grace_seconds": 0}, r"shutdown_grace_seconds: Value error, 0 is not above 0: give the seconds"),
        ({"shutdown_grace_seconds": "nan"}, r"shutdown_grace_seconds: Value error, nan is not above 0"),
    ],
)
def test_bad_limits_are_refused_with_what_to_write(overrides: dict[str, object], message: str):
    with pytest.raises(InvalidConfigError, match=message):
        load_settings(None, listeners=["SASL_PLAINTEXT://0.0.0.0:9092"], **overrides)


def test_a_limit_of_zero_per_address_with_overrides_is_an_allow_list():
    settings = load_settings(None, max_connections_per_ip=0, max_connections_per_ip_overrides="10.0.0.0/8:100")
    assert (settings.max_connections_per_ip, settings.max_connections_per_ip_overrides) == (0, {"10.0.0.0/8": 100})


@pytest.mark.parametrize("command", ["serve", "proxy"])
def test_the_flags_of_serve_and_proxy_reach_the_settings(command: str, tmp_path: Path):
    """A bad value given as a flag is refused before anything starts, with the setting named (so the flag is read)."""
    result = CliRunner().invoke(
        app,
        [command, "--data-dir", str(tmp_path), *(["--upstream", "127.0.0.1:1"] if command == "proxy" else []),
         "--max-connections-per-ip", "0", "--max-connections-per-ip-overrides", "10.0.0.0/8:3",
         "--max-connections-per-listener", "SASL_SSL://0.0.0.0:9093=5"],
    )  # fmt: skip
    assert result.exit_code == 2
    assert "max_connections_per_listener names SASL_SSL://0.0.0.0:9093, which is not a listener" in result.output


def test_usage_is_the_default_audit_mode_and_its_window_must_be_positive(tmp_path: Path):
    settings = load_settings(None)
    assert (settings.audit_mode, settings.audit_usage_window_seconds) == ("usage", 60.0)
    shipped = load_settings(Path(__file__).resolve().parents[1] / "config" / "kafkaguard.yaml")
    assert (shipped.audit_mode, shipped.audit_usage_window_seconds) == ("usage", 60.0)
    assert load_settings(None, audit_mode="all", audit_usage_window_seconds="0.5").audit_usage_window_seconds == 0.5
    with pytest.raises(InvalidConfigError, match="audit_usage_window_seconds: Input should be greater than 0"):
        load_settings(None, audit_usage_window_seconds=0)
    with pytest.raises(InvalidConfigError, match="audit_mode: Input should be 'usage', 'denied' or 'all'"):
        load_settings(None, audit_mode="some")


_GSSAPI = {
    "sasl_mechanisms": ["GSSAPI"],
    "sasl_kerberos_service_name": "kafka",
    "sasl_kerberos_keytab": "/etc/kafka.keytab",
    "sasl_kerberos_principal": "kafka/broker1.example.com@EXAMPLE.COM",
}


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"sasl_kerberos_keytab": None, "sasl_kerberos_principal": None},
         "sasl_mechanisms has GSSAPI but sasl_kerberos_keytab, sasl_kerberos_principal are not set"),
        ({"sasl_kerberos_service_name": None}, "sasl_mechanisms has GSSAPI but sasl_kerberos_service_name is not set"),
        ({"sasl_kerberos_principal": "kafka@EXAMPLE.COM"}, "has no host: a service principal is <service>/<host>"),
        ({"sasl_kerberos_principal": "zk/broker1@EXAMPLE.COM"},
         "is not of the service sasl_kerberos_service_name 'kafka'"),
        ({"sasl_kerberos_principal": "a/b/c@EXAMPLE.COM"}, "is not a Kerberos principal"),
        ({"sasl_kerberos_principal_to_local_rules": "RULE:[1:$1]/L,DEFAULT/L"},
         "Invalid rule: `DEFAULT/L`, unmatched substring: `/L`"),
    ],
)  # fmt: skip
def test_gssapi_settings_are_checked_together(changes: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidConfigError, match=re.escape(message)):
        load_settings(None, **{key: value for key, value in (_GSSAPI | changes).items() if value is not None})


def test_gssapi_settings_and_kafkas_list_splitting() -> None:
    settings = load_settings(None, **_GSSAPI, sasl_kerberos_principal_to_local_rules=" RULE:[1:$1]/L , DEFAULT ")
    assert settings.sasl_kerberos_principal_to_local_rules == ["RULE:[1:$1]/L", "DEFAULT"]
    assert load_settings(None).sasl_kerberos_principal_to_local_rules == ["DEFAULT"]
    assert load_settings(None, **(_GSSAPI | {"sasl_kerberos_principal": "kafka/broker1"})).sasl_kerberos_principal
