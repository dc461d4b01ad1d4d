"""Shadow ACLs on ``kafkaguard serve``: the server answers with its active ACLs and writes a shadow event for each
decision the candidate file would flip (the proxy's side: ``tests/kafka/proxy/test_proxy_rollout.py``)."""

from __future__ import annotations

import functools
from pathlib import Path

from kafkaguard.cli.aclfile import load_acl_file
from kafkaguard.server.app import KafkaServer
from tests.serving import TlsFiles, start_server
from tests.wire import Wire, metadata

CANDIDATE = """\
principals:
  User:carol:
    acls:
      - topic: pii
        operations: [Describe]
"""


def test_serve_writes_the_shadow_flips_and_answers_with_the_active_acls(tmp_path: Path, tls_files: TlsFiles):
    shadow = tmp_path / "candidate.yaml"
    shadow.write_text(CANDIDATE)
    handle = start_server(tmp_path / "data", tls_files, server_type=functools.partial(KafkaServer,
                          shadow_loader=load_acl_file), shadow_acls=shadow)  # fmt: skip
    try:
        handle.add_user("carol", "carol-pw")
        with Wire(handle.sasl) as wire:
            wire.login("carol", "carol-pw")
            answer = metadata(wire, ["pii"], allow_auto_topic_creation=False)
        (topic,) = answer.topics
        assert topic.error_code.name == "topic_authorization_failed"  # the active set: carol has nothing
        events = [e for e in handle.audit_envelopes() if e["type"] == "io.kafkaguard.shadow.v1"]
        assert [(e["subject"], e["data"]["decision"], e["data"]["shadow_decision"]) for e in events] == [
            ("TOPIC:pii", "DENIED", "ALLOWED")
        ]
        assert events[0]["data"]["principal"] == "User:carol" and events[0]["source"].startswith("kafkaguard://")
    finally:
        handle.stop()
    assert handle.errors == []
