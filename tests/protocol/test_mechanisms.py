"""``mechanisms.TokenCheck`` remembers valid tokens only while the key set they were checked against is current and
they have not expired: a remembered token is never more valid than a fresh check would find it."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from kafkaguard.identity import oauth
from kafkaguard.identity.jwks import JwksSource, RefreshReason
from kafkaguard.identity.oauth import TokenRejected
from kafkaguard.protocol import mechanisms
from kafkaguard.protocol.mechanisms import TokenCheck
from tests.identity.tokens import EXPECTATIONS, claims, jwks_document, public_jwk, session_keys, sign, write_jwks


def count_checks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    checked: list[str] = []
    real = oauth.validate_token

    def counting(token, keys, expectations, now_ms):
        checked.append(token)
        return real(token, keys, expectations, now_ms)

    monkeypatch.setattr(mechanisms, "validate_token", counting)
    return checked


def test_a_valid_token_is_checked_once_until_the_keys_change(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checked = count_checks(monkeypatch)
    jwks = write_jwks(tmp_path / "jwks.json", jwks_document())

    async def scenario() -> None:
        source = JwksSource(jwks.as_uri(), refresh_ms=3_600_000)
        await source.start()
        check = TokenCheck(source, EXPECTATIONS)
        token = sign(claims(int(time.time())), session_keys().rsa_1)
        for _ in range(5):
            assert (await check.validate(token)).principal_name == "alice"
        assert len(checked) == 1
        # the identity provider drops rsa-1: after the refresh the same token is checked again, and refused
        write_jwks(jwks, [public_jwk(session_keys().ec_1, "ec-1")])
        await source._refresh(RefreshReason.SCHEDULED)  # the scheduled refresh, now
        with pytest.raises(TokenRejected):
            await check.validate(token)
        assert len(checked) == 2
        await source.close()

    asyncio.run(scenario())


def test_a_remembered_token_past_its_expiry_is_checked_in_full_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checked = count_checks(monkeypatch)
    jwks = write_jwks(tmp_path / "jwks.json", jwks_document())

    async def scenario() -> None:
        source = JwksSource(jwks.as_uri())
        await source.start()
        check = TokenCheck(source, EXPECTATIONS)
        now = int(time.time())
        token = sign(claims(now, exp=now + 1), session_keys().rsa_1)
        await check.validate(token)
        await check.validate(token)
        assert len(checked) == 1
        await asyncio.sleep(1.2)  # past exp: within the 30 s skew a full check still accepts it, as Kafka does
        assert (await check.validate(token)).principal_name == "alice"
        assert len(checked) == 2
        refused = sign(claims(now, aud="other"), session_keys().rsa_1)
        for _ in range(2):  # a refused token is never remembered
            with pytest.raises(TokenRejected):
                await check.validate(refused)
        assert len(checked) == 4
        await source.close()

    asyncio.run(scenario())
