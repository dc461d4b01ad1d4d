from __future__ import annotations

import pytest

from kafkaguard.errors import ScramError, UnsupportedMechanismError
from kafkaguard.scram import ScramMechanism


def test_wire_codes_and_names_are_kafkas() -> None:
    assert [(m.code, m.mechanism_name, m.hash_name, m.digest_size) for m in ScramMechanism] == [
        (1, "SCRAM-SHA-256", "sha256", 32),
        (2, "SCRAM-SHA-512", "sha512", 64),
    ]
    assert str(ScramMechanism.SCRAM_SHA_512) == "SCRAM-SHA-512"


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
def test_iteration_bounds_are_kafkas(mechanism: ScramMechanism) -> None:
    assert (mechanism.min_iterations, mechanism.max_iterations) == (4096, 16384)


@pytest.mark.parametrize("code", [1, 2])
def test_from_code_round_trips(code: int) -> None:
    assert ScramMechanism.from_code(code).code == code


@pytest.mark.parametrize("code", [0, 3, -1, 255])
def test_unknown_code_is_refused_with_kafkas_message(code: int) -> None:
    with pytest.raises(UnsupportedMechanismError, match=r"^Unknown SCRAM mechanism") as caught:
        ScramMechanism.from_code(code)
    assert isinstance(caught.value, ScramError)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("SCRAM-SHA-256", ScramMechanism.SCRAM_SHA_256),
        ("scram-sha-512", ScramMechanism.SCRAM_SHA_512),
        (" SCRAM_SHA_512 ", ScramMechanism.SCRAM_SHA_512),
    ],
)
def test_from_name(name: str, expected: ScramMechanism) -> None:
    assert ScramMechanism.from_name(name) is expected


@pytest.mark.parametrize("name", ["PLAIN", "SCRAM-SHA-1", "SCRAM-SHA-256-PLUS", ""])
def test_unknown_name_is_refused(name: str) -> None:
    with pytest.raises(UnsupportedMechanismError, match="Unknown SCRAM mechanism"):
        ScramMechanism.from_name(name)
