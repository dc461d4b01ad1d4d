"""A drain on a SASL_SSL listener (``ListeningServer.drain``, in process): the TLS connection's login in flight is
answered, then the connection gets its TLS close; an idle logged-in TLS connection is closed at once; nothing is
forced. (The SIGTERM, the console and the plaintext FIN: ``test_drain.py``.)"""

from __future__ import annotations

import asyncio
import re
import ssl
from pathlib import Path

import pytest
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from tests.serving import ADMIN, ADMIN_PASSWORD, TlsFiles, start_server
from tests.wire import Wire, decode_response, encode_request

SASL_AUTHENTICATION_FAILED = 58


def test_a_tls_listener_drains_answers_in_flight_and_closes_idle(
    tmp_path: Path, tls_files: TlsFiles, caplog: pytest.LogCaptureFixture
) -> None:
    handle = start_server(tmp_path / "data", tls_files, sasl_mechanisms=["SCRAM-SHA-256", "PLAIN"],
                          auth_failure_delay_ms=1500, shutdown_grace_seconds=20)  # fmt: skip
    tls = ssl.create_default_context(cafile=str(tls_files.certfile))
    try:
        idle = Wire(handle.sasl_ssl, tls=tls, timeout=30)
        idle.login(ADMIN, ADMIN_PASSWORD)
        slow = Wire(handle.sasl_ssl, tls=tls, timeout=30)
        assert slow.request(SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
        slow.send_frame(encode_request(SaslAuthenticateRequest(auth_bytes=b"\0nobody\0wrong"), 5))
        with caplog.at_level("INFO", logger="kafkaguard"):
            draining = asyncio.run_coroutine_threadsafe(handle.server.drain(), handle.loop)
            assert idle.closed()  # at once, while the slow login still waits for its answer
            assert not draining.done()
            payload = slow.recv_frame()
            assert payload is not None, "the TLS login in flight got no answer"
            correlation_id, body = decode_response(payload, SaslAuthenticateRequest.__api_key__, 2)
            assert (correlation_id, int(body.error_code.value)) == (5, SASL_AUTHENTICATION_FAILED)
            assert slow.closed()
            draining.result(30)
        assert any(re.search(r"2 connections closed at a request boundary, 0 forced", r.getMessage())
                   for r in caplog.records), [r.getMessage() for r in caplog.records]  # fmt: skip
        idle.close()
        slow.close()
    finally:
        handle.stop()
