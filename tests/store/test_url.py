"""``StoreUrl``: a PostgreSQL store's address, which may never hold the password, and the settings that give it."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkaguard.config import load_settings
from kafkaguard.errors import InvalidConfigError
from kafkaguard.store import StoreUrl, is_store_url


def test_a_url_names_user_host_port_and_database() -> None:
    url = StoreUrl.parse("postgresql://kg@db.internal:5433/kafkaguard?sslmode=verify-full")
    assert (url.user, url.host, url.port, url.database) == ("kg", "db.internal", 5433, "kafkaguard")
    assert url.options == (("sslmode", "verify-full"),)
    assert str(url) == "postgresql://kg@db.internal:5433/kafkaguard?sslmode=verify-full"
    assert StoreUrl.parse("postgres://kg@db/k").port == 5432


@pytest.mark.parametrize(
    "text",
    [
        "postgresql://kg:hunter2@db:5432/k",
        "postgresql://kg:@db:5432/k",
        "postgresql://kg@db:5432/k?password=hunter2",
        "postgresql://kg@db:5432/k?sslpassword=hunter2",
    ],
)
def test_a_password_in_the_url_is_refused_without_being_shown(text: str) -> None:
    with pytest.raises(InvalidConfigError) as raised:
        StoreUrl.parse(text)
    message = str(raised.value)
    assert "hunter2" not in message
    assert "KAFKAGUARD_STORE_PASSWORD" in message
    assert "store_password_file" in message


@pytest.mark.parametrize(
    "text", ["data", "/var/lib/kafkaguard", "mysql://u@h/d", "postgresql://db/k", "postgresql://u@h/"]
)
def test_anything_else_is_refused(text: str) -> None:
    with pytest.raises(InvalidConfigError):
        StoreUrl.parse(text)


def test_the_password_is_only_in_the_conninfo() -> None:
    url = StoreUrl.parse("postgresql://kg@db:5432/k", password="hunter2")  # noqa: S106
    assert "hunter2" not in repr(url)
    assert "hunter2" not in str(url)
    assert "password=hunter2" in url.conninfo()
    assert url.scrub("failed for hunter2") == "failed for ***"


def test_is_store_url() -> None:
    assert is_store_url("postgresql://u@h/d")
    assert is_store_url("POSTGRES://u@h/d")
    assert not is_store_url("data/postgresql")


def test_settings_take_the_password_from_the_environment_or_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KAFKAGUARD_STORE", "postgresql://kg@db:5432/k")
    monkeypatch.setenv("KAFKAGUARD_STORE_PASSWORD", "from-env")
    url = load_settings().store_url
    assert url is not None
    assert url.password == "from-env"  # noqa: S105
    monkeypatch.delenv("KAFKAGUARD_STORE_PASSWORD")
    secret = tmp_path / "pw"
    secret.write_text("from-file\n")
    url = load_settings(store_password_file=secret).store_url
    assert url is not None
    assert url.password == "from-file"  # noqa: S105
    monkeypatch.setenv("KAFKAGUARD_STORE_PASSWORD", "from-env")
    with pytest.raises(InvalidConfigError, match="not both"):
        _ = load_settings(store_password_file=secret).store_url
    assert load_settings(store=None).store_url is not None  # the environment's store stays


def test_settings_refuse_a_url_with_a_password(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKAGUARD_STORE", "postgresql://kg:hunter2@db:5432/k")
    with pytest.raises(InvalidConfigError) as raised:
        load_settings()
    assert "hunter2" not in str(raised.value)
