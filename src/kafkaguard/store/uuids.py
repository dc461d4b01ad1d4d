"""Kafka's ``Uuid``: topic ids and the cluster id, made the way Kafka makes them.

A Kafka Uuid is 16 bytes (``uuid.UUID`` here, as kio's generated types use for ``uuid`` fields). Its string form,
used for cluster ids, is the 22-character URL-safe base64 of those bytes without padding. Kafka's
``Uuid.randomUuid`` draws random version-4 UUIDs until it gets one that is not reserved (all-zero means "no
topic id" on the wire, and 1 is the metadata topic's id) and whose string form does not start with ``-``
(which command lines would take for an option); ``random_uuid`` does the same.
"""

from __future__ import annotations

import base64
import uuid

#: The null topic id on the wire (Kafka ``Uuid.ZERO_UUID``).
ZERO_UUID = uuid.UUID(int=0)
#: The id of ``__cluster_metadata`` (Kafka ``Uuid.METADATA_TOPIC_ID`` = ``ONE_UUID``): never given to a topic.
METADATA_TOPIC_ID = uuid.UUID(int=1)
_RESERVED = frozenset({ZERO_UUID, METADATA_TOPIC_ID})


def uuid_to_string(value: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 of the 16 bytes, no padding (22 characters)."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode("ascii")


def random_uuid() -> uuid.UUID:
    """A fresh random id as Kafka's ``Uuid.randomUuid`` makes one: never reserved, never ``-`` first."""
    while True:
        value = uuid.uuid4()
        if value not in _RESERVED and not uuid_to_string(value).startswith("-"):
            return value


def new_cluster_id() -> str:
    """A cluster id as Kafka's ``kafka-storage random-uuid`` prints one."""
    return uuid_to_string(random_uuid())
