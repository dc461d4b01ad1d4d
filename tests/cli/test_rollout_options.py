"""``kafkaguard proxy --enforcement`` and ``--shadow-acls``: refused with a clear error before anything starts when
they cannot work (no audit log; a shadow file that is not an ACL file), before the proxy reaches its upstream."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from kafkaguard.cli.main import app


def test_proxy_refuses_permissive_without_an_audit_log(tmp_path: Path):
    result = CliRunner().invoke(app, ["proxy", "--upstream", "127.0.0.1:1", "--data-dir", str(tmp_path),
                                      "--enforcement", "permissive"])  # fmt: skip
    assert result.exit_code == 2
    assert "enforcement permissive needs an audit trail" in result.output


def test_proxy_starts_no_further_with_a_bad_shadow_file(tmp_path: Path):
    bad = tmp_path / "candidate.yaml"
    bad.write_text("principals: [")
    audit = str(tmp_path / "audit.log")
    result = CliRunner().invoke(app, ["proxy", "--upstream", "127.0.0.1:1", "--data-dir", str(tmp_path / "d"),
                                      "--audit-log", audit, "--shadow-acls", str(bad)])  # fmt: skip
    assert result.exit_code == 2
    assert "candidate.yaml" in result.output
