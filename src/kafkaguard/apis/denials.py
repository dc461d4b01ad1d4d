"""Refusals Kafka words its own way, shared by the server's answers and the proxy's."""

from __future__ import annotations

from kafkaguard.model import ItemError, KafkaErrorCode

#: CreateTopics' denial on Kafka 3.9: TOPIC_AUTHORIZATION_FAILED with its own text (measured).
CREATE_DENIED = ItemError(KafkaErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
