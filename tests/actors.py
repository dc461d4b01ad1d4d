"""The actor of changes tests make through the services directly (no door): a fixed, recognisable one."""

from __future__ import annotations

from kafkaguard.model import Actor

#: Who a test's direct service call acts as.
ACTOR = Actor(principal="User:test", address="127.0.0.1", interface="internal", request_id=None)
