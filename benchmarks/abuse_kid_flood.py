"""Issue 36 finding 2: unauthenticated clients forcing JWKS reloads with a new ``kid`` in every token.

Three loads against ``kafkaguard serve`` with OAUTHBEARER, each on the code before issue 36 and on this tree:

* a ``file:`` JWKS, forged tokens (a key no JWKS holds, a new kid each) from 16 addresses at once: the reloads are
  the target's ``JWKS refresh of … complete`` log lines;
* an https JWKS (served here, by ``tests.identity.jwks_server``, counting its requests: what the identity provider
  sees), the same load: fetches after the start;
* the same https JWKS and one address alone (the finding's 518 attempts from one address, 98 fetches).

Goal: reloads and fetches per minute at most ``sasl_oauthbearer_jwks_expedited_refreshes_per_minute`` (6, the
default) whatever the flood: at most 6 in the window, which is under a minute (10 s with ``--quick``, 58 s).
"""

from __future__ import annotations

import time
from pathlib import Path

from benchmarks.abuse_findings import FindingContext, FindingRow
from benchmarks.login_flood import THROTTLED, Outcomes, flood, sources, start_target
from tests.identity.jwks_server import jwks_endpoint
from tests.identity.tokens import AUDIENCE, ISSUER, claims, jwks_document, session_keys, sign, write_jwks

FINDING = "kid-flood"
LIMIT_PER_MINUTE = 6  # the default of sasl_oauthbearer_jwks_expedited_refreshes_per_minute
INVALID_TOKEN = b'{"status":"invalid_token"}'
#: A full run's flood: just under a minute, so that the window with its last answers fits in one minute.
WINDOW_S = 58.0


def forged_token(number: int) -> bytes:
    now = int(time.time())
    token = sign(claims(now, sub="mallory"), session_keys().rsa_other, kid=f"forged-{number}-{now}")
    return f"n,,\x01auth=Bearer {token}\x01\x01".encode()


def classify(code: int, auth_bytes: bytes, message: str | None) -> str:
    if code == 0 and auth_bytes == INVALID_TOKEN:
        return "refused token"  # validated: Kafka's challenge
    if message is not None and message.startswith(THROTTLED):
        return "throttled"  # refused before the key lookup (this tree's address budget)
    return "other"


def settings(url: str, cafile: Path | None) -> dict[str, object]:
    found: dict[str, object] = {
        "listeners": ["SASL_PLAINTEXT://127.0.0.1:PORT"],
        "sasl_mechanisms": ["SCRAM-SHA-256", "OAUTHBEARER"],
        "sasl_oauthbearer_jwks_endpoint_url": url,
        "sasl_oauthbearer_expected_audience": [AUDIENCE],
        "sasl_oauthbearer_expected_issuer": ISSUER,
    }
    if cafile is not None:
        found["sasl_oauthbearer_jwks_endpoint_cafile"] = str(cafile)
    return found


def describe(reloads: int, outcomes: Outcomes) -> str:
    attempts = sum(outcomes.counts.values())
    return (f"{reloads} in {outcomes.seconds:.0f} s for {attempts} tokens "
            f"({outcomes.counts['throttled']} refused unchecked)")  # fmt: skip


def run(context: FindingContext) -> list[FindingRow]:
    seconds = 10.0 if context.quick else WINDOW_S
    codes = {"after": None, "before": context.before_pythonpath}
    loads = [
        ("file: JWKS, 16 addresses: reloads", "file", 16),
        ("https JWKS, 16 addresses: IdP fetches", "https", 16),
        ("https JWKS, 1 address: IdP fetches", "https", 1),
    ]
    rows = []
    for target, kind, addresses in loads:
        measured: dict[str, str] = {}
        met = True
        for code, pythonpath in codes.items():
            if code == "before" and pythonpath is None:
                measured[code] = "not measured: no before tree"
                continue
            directory = context.workdir / f"kid-flood-{kind}-{addresses}-{code}"
            directory.mkdir(parents=True, exist_ok=True)
            reloads, outcomes = _measure(context.executable, pythonpath, directory, kind, addresses, seconds)
            measured[code] = describe(reloads, outcomes)
            if code == "after":  # the window is under a minute: it may hold at most the limit
                met = reloads <= LIMIT_PER_MINUTE and outcomes.seconds < 60
        goal = f"≤ {LIMIT_PER_MINUTE} in any minute (sasl_oauthbearer_jwks_expedited_refreshes_per_minute)"
        rows.append(FindingRow(FINDING, target, measured["before"], measured["after"], goal, met))
    return rows


def _measure(
    executable: str, pythonpath: str | None, directory: Path, kind: str, addresses: int, seconds: float
) -> tuple[int, Outcomes]:
    prefix = "127.0.36" if addresses > 1 else "127.0.37"
    if kind == "file":
        jwks = write_jwks(directory / "jwks.json", jwks_document())
        target = start_target(executable, pythonpath, directory, settings(jwks.as_uri(), None))
        try:
            outcomes = flood(target.port, sources(prefix, addresses), "OAUTHBEARER", forged_token, classify, seconds)
            return target.log_lines("JWKS refresh of"), outcomes
        finally:
            target.stop()
    with jwks_endpoint(directory / "idp", jwks_document()) as idp:
        target = start_target(executable, pythonpath, directory, settings(idp.url, idp.cafile))
        try:
            started_with = idp.hits
            outcomes = flood(target.port, sources(prefix, addresses), "OAUTHBEARER", forged_token, classify, seconds)
            return idp.hits - started_with, outcomes
        finally:
            target.stop()
