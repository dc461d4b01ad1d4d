"""The console — REST API, web page and Prometheus metrics, over the same services as the Kafka server.

It never imports ``kafkaguard.server``; the CLI composes the two (``kafkaguard serve --http-listener``).
"""

from __future__ import annotations

from kafkaguard.console.app import MAX_BODY_BYTES, create_app
from kafkaguard.console.runner import ConsoleServer, HttpListener

__all__ = ["MAX_BODY_BYTES", "ConsoleServer", "HttpListener", "create_app"]
