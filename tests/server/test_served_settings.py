"""A running server records its authorization settings in its data directory, for ``kafkaguard can`` and
``who-can --data-dir`` (``config.record_served_settings``)."""

from __future__ import annotations

import json

from kafkaguard.config import SERVED_SETTINGS_FILE
from tests.serving import ServerHandle


def test_the_server_records_its_super_users_and_no_acl_rule(server: ServerHandle):
    settings = server.services.settings
    record = json.loads((settings.data_dir / SERVED_SETTINGS_FILE).read_text())
    assert record == {
        "super_users": settings.super_users,
        "allow_everyone_if_no_acl_found": settings.allow_everyone_if_no_acl_found,
        "served_by": "kafkaguard serve",
    }
    assert "User:admin" in record["super_users"]
