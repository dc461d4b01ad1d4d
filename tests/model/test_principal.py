"""Kafka principals: ``Type:Name`` split at the first colon (SEMANTICS.md §2, §3.1, §16.2)."""

from __future__ import annotations

import pytest

from kafkaguard import InvalidConfigError
from kafkaguard.model import ANONYMOUS_PRINCIPAL, WILDCARD_PRINCIPAL, KafkaPrincipal, principal_error


def test_constants():
    assert WILDCARD_PRINCIPAL == "User:*"
    assert ANONYMOUS_PRINCIPAL == "User:ANONYMOUS"


@pytest.mark.parametrize(
    ("text", "principal_type", "name"),
    [
        ("User:alice", "User", "alice"),
        ("User:*", "User", "*"),
        ("Group:*", "Group", "*"),
        # Split at the first colon: the name may contain colons.
        ("User:CN=a,O=b:c", "User", "CN=a,O=b:c"),
        ("User:", "User", ""),
    ],
)
def test_parse_splits_at_first_colon(text, principal_type, name):
    parsed = KafkaPrincipal.parse(text)
    assert parsed == KafkaPrincipal(principal_type, name)
    assert str(parsed) == text


@pytest.mark.parametrize("text", ["alice", "", ":alice", ":"])
def test_parse_rejects_missing_colon_or_empty_type(text):
    with pytest.raises(InvalidConfigError, match="expected Type:Name"):
        KafkaPrincipal.parse(text)
    reason = principal_error(text)
    assert reason is not None
    assert repr(text) in reason


def test_principal_error_is_none_for_valid():
    assert principal_error("User:alice") is None
    assert principal_error("ServiceAccount:svc-1") is None


def test_equality_is_type_and_name_case_sensitive():
    assert KafkaPrincipal("User", "alice") == KafkaPrincipal.parse("User:alice")
    assert KafkaPrincipal("User", "alice") != KafkaPrincipal("user", "alice")
    assert KafkaPrincipal("User", "alice") != KafkaPrincipal("User", "Alice")
    assert KafkaPrincipal("User", "alice") != KafkaPrincipal("Group", "alice")


def test_string_equality_is_principal_equality():
    # The authorizer compares strings; that is sound because the split at the first colon is unique.
    for a in ("User:a:b", "User:a", "Us:er:a"):
        for b in ("User:a:b", "User:a", "Us:er:a"):
            assert (a == b) == (KafkaPrincipal.parse(a) == KafkaPrincipal.parse(b))
