"""``kafkaguard users add``: straight into the local store, with the one default iteration count."""

from __future__ import annotations

import inspect
from pathlib import Path

from typer.testing import CliRunner

from kafkaguard.cli import configs, users
from kafkaguard.cli.main import app
from kafkaguard.scram import DEFAULT_ITERATIONS, ScramMechanism
from kafkaguard.service import CredentialService
from kafkaguard.store import CredentialInfo, SqliteStore


def test_users_add_stores_both_mechanisms_with_the_default_iterations(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["users", "add", "alice", "--password", "alice-secret", "--data-dir", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    assert f"(iterations={DEFAULT_ITERATIONS})" in result.output
    assert "alice-secret" not in result.output
    with SqliteStore.in_data_dir(tmp_path) as store:
        assert store.credential_infos(["alice"]) == {
            "alice": (
                CredentialInfo(ScramMechanism.SCRAM_SHA_256, DEFAULT_ITERATIONS),
                CredentialInfo(ScramMechanism.SCRAM_SHA_512, DEFAULT_ITERATIONS),
            )
        }


def test_every_default_iteration_count_is_the_one_constant() -> None:
    assert DEFAULT_ITERATIONS == 8192
    assert inspect.signature(users.add).parameters["iterations"].default == DEFAULT_ITERATIONS
    assert inspect.signature(CredentialService.upsert_password).parameters["iterations"].default == DEFAULT_ITERATIONS
    assert configs.parse_add_config("SCRAM-SHA-256=[password=p]") == {
        ScramMechanism.SCRAM_SHA_256: (DEFAULT_ITERATIONS, "p")
    }
