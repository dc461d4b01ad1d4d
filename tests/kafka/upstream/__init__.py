"""Tests against a real multi-broker Kafka cluster, the upstream of ``kafkaguard proxy``."""
