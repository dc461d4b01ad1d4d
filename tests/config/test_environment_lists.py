"""A list or mapping setting given in the environment must be JSON (pydantic-settings decodes it so); one that is
not is a clear error naming the variable and showing the JSON form, not pydantic-settings' traceback (as it was:
``SettingsError: error parsing value for field "listeners" from source "EnvSettingsSource"``)."""

from __future__ import annotations

import pytest

from kafkaguard.config import load_settings
from kafkaguard.errors import InvalidConfigError


@pytest.mark.parametrize(
    ("variable", "shown"),
    [
        ("KAFKAGUARD_LISTENERS", """KAFKAGUARD_LISTENERS='["SASL_PLAINTEXT://127.0.0.1:9092"]'"""),
        ("KAFKAGUARD_SASL_MECHANISMS", """KAFKAGUARD_SASL_MECHANISMS='["SCRAM-SHA-256", "SCRAM-SHA-512"]'"""),
        ("KAFKAGUARD_AUDIT_KAFKA_ROUTES", "KAFKAGUARD_AUDIT_KAFKA_ROUTES='[{" + '"category": "management"'),
    ],
)
def test_a_list_variable_that_is_not_json_says_how_to_write_it(
    variable: str, shown: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(variable, "SASL_PLAINTEXT://127.0.0.1:9093")
    with pytest.raises(InvalidConfigError) as raised:
        load_settings()
    assert f"{variable} is not JSON" in str(raised.value)
    assert shown in str(raised.value)


def test_the_json_form_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKAGUARD_LISTENERS", '["PLAINTEXT://127.0.0.1:9093", "SASL_PLAINTEXT://127.0.0.1:9094"]')
    assert load_settings().listeners == ["PLAINTEXT://127.0.0.1:9093", "SASL_PLAINTEXT://127.0.0.1:9094"]
