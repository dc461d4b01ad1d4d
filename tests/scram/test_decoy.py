"""Decoy credentials and their profile: the shape of stored credentials, so unknown users cannot be told apart."""

from __future__ import annotations

import random

import pytest

from kafkaguard.errors import InvalidConfigError
from kafkaguard.scram import (
    DEFAULT_DECOY_PROFILE,
    DEFAULT_ITERATIONS,
    DEFAULT_SALT_BYTES,
    DecoyProfile,
    ScramCredential,
    ScramMechanism,
    decoy_credential,
    decoy_profile_of,
)
from kafkaguard.scram.decoy import DECOY_CACHE_NAMES

SHA_256 = ScramMechanism.SCRAM_SHA_256
SHA_512 = ScramMechanism.SCRAM_SHA_512
SECRET = b"0123456789abcdef-decoy-secret"


def stored(mechanism: ScramMechanism, iterations: int, salt_bytes: int) -> ScramCredential:
    return ScramCredential(mechanism, b"s" * salt_bytes, b"k" * 32, b"v" * 32, iterations)


def test_without_credentials_the_profile_is_kafkaguards_default() -> None:
    assert decoy_profile_of(SHA_256, []) == DEFAULT_DECOY_PROFILE
    assert (DEFAULT_DECOY_PROFILE.iterations, DEFAULT_DECOY_PROFILE.salt_bytes) == (DEFAULT_ITERATIONS, 24)
    assert DEFAULT_SALT_BYTES == 24


def test_the_profile_is_the_most_common_shape_of_that_mechanism_only() -> None:
    # The module docstring's example: 40 credentials of `kafkaguard users add`, 3 of confluent-kafka.
    credentials = [stored(SHA_256, 8192, 24)] * 40 + [stored(SHA_256, 4096, 64)] * 3 + [stored(SHA_512, 4096, 64)]
    random.Random(7).shuffle(credentials)
    assert decoy_profile_of(SHA_256, credentials) == DecoyProfile(iterations=8192, salt_bytes=24)
    assert decoy_profile_of(SHA_512, credentials) == DecoyProfile(iterations=4096, salt_bytes=64)


def test_ties_go_to_the_larger_shape_whatever_the_order() -> None:
    credentials = [stored(SHA_256, 4096, 64), stored(SHA_256, 8192, 24), stored(SHA_256, 8192, 16)]
    for seed in range(5):
        random.Random(seed).shuffle(credentials)
        assert decoy_profile_of(SHA_256, credentials) == DecoyProfile(iterations=8192, salt_bytes=24)


def test_credentials_a_server_would_not_announce_do_not_shape_the_decoy() -> None:
    unusable = [stored(SHA_256, 1024, 24)] * 5 + [stored(SHA_256, 20000, 24)] * 5 + [stored(SHA_256, 8192, 200)] * 5
    assert decoy_profile_of(SHA_256, unusable) == DEFAULT_DECOY_PROFILE
    assert decoy_profile_of(SHA_256, [*unusable, stored(SHA_256, 5000, 7)]) == DecoyProfile(
        iterations=5000, salt_bytes=7
    )


@pytest.mark.parametrize(("iterations", "salt_bytes"), [(0, 24), (4096, 0), (4096, 129)])
def test_impossible_profiles_are_refused(iterations: int, salt_bytes: int) -> None:
    with pytest.raises(InvalidConfigError, match="decoy profile"):
        DecoyProfile(iterations=iterations, salt_bytes=salt_bytes)


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
def test_a_decoy_is_deterministic_per_secret_mechanism_and_name_and_shaped_by_the_profile(
    mechanism: ScramMechanism,
) -> None:
    profile = DecoyProfile(iterations=12000, salt_bytes=100)
    decoy = decoy_credential(SECRET, mechanism, "mallory", profile)
    assert decoy == decoy_credential(SECRET, mechanism, "mallory", profile)
    assert (decoy.mechanism, decoy.iterations, len(decoy.salt)) == (mechanism, 12000, 100)
    assert len(decoy.stored_key) == len(decoy.server_key) == mechanism.digest_size
    other = SHA_512 if mechanism is SHA_256 else SHA_256
    variants = [
        decoy_credential(SECRET + b"!", mechanism, "mallory", profile),
        decoy_credential(SECRET, other, "mallory", profile),
        decoy_credential(SECRET, mechanism, "mallorz", profile),
    ]
    assert all(v.salt != decoy.salt and v.stored_key != decoy.stored_key for v in variants)
    assert "mallory" not in repr(decoy) and decoy.salt.hex() not in repr(decoy)


def test_a_decoy_is_remembered_as_derived_and_the_memo_is_bounded() -> None:
    profile = DecoyProfile(iterations=4096, salt_bytes=24)
    decoy_credential.cache_clear()
    first = decoy_credential(SECRET, ScramMechanism.SCRAM_SHA_256, "mallory", profile)
    again = decoy_credential(SECRET, ScramMechanism.SCRAM_SHA_256, "mallory", profile)
    assert decoy_credential.cache_info().hits == 1
    assert again == first == decoy_credential.__wrapped__(SECRET, ScramMechanism.SCRAM_SHA_256, "mallory", profile)
    # every argument is part of the key: another mechanism, secret or profile is derived anew
    assert decoy_credential(SECRET, ScramMechanism.SCRAM_SHA_512, "mallory", profile) != first
    assert decoy_credential(SECRET + b"x", ScramMechanism.SCRAM_SHA_256, "mallory", profile) != first
    for i in range(DECOY_CACHE_NAMES + 10):
        decoy_credential(SECRET, ScramMechanism.SCRAM_SHA_256, f"name-{i}", profile)
    assert decoy_credential.cache_info().currsize == DECOY_CACHE_NAMES
