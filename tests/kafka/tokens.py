"""OAuth for tests: a signing key published as a JWKS file (what the test broker's OAUTHBEARER listener trusts, through
``sasl.oauthbearer.jwks.endpoint.url=file:…``), signed access tokens, and a client-credentials token endpoint.

::

    key = SigningKey.create("key-1")
    write_jwks(tmp_path / "jwks.json", [key])
    token = key.sign(subject="alice", lifetime=300)                 # RS256, kid "key-1", iat/exp/sub

    with TokenEndpoint(key, clients={"proxy": "proxy-secret"}) as endpoint:   # http://127.0.0.1:PORT/token
        ...  # POST grant_type=client_credentials, HTTP Basic client_id:client_secret → {"access_token": …}
"""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.parse
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm


@dataclass(frozen=True)
class SigningKey:
    """An RSA key that signs tokens (RS256) under key id ``kid``."""

    kid: str
    private_key: rsa.RSAPrivateKey = field(repr=False)

    @classmethod
    def create(cls, kid: str) -> SigningKey:
        return cls(kid, rsa.generate_private_key(public_exponent=65537, key_size=2048))

    def jwk(self) -> dict[str, Any]:
        """The public key as a JWK (what a JWKS lists)."""
        public: dict[str, Any] = json.loads(RSAAlgorithm.to_jwk(self.private_key.public_key()))
        return public | {"kid": self.kid, "use": "sig", "alg": "RS256"}

    def sign(self, subject: str, *, lifetime: float = 300.0, now: float | None = None, **claims: Any) -> str:
        """A JWT for ``subject`` with ``iat`` and ``exp`` (Kafka's validator requires both) and ``claims``."""
        issued = int(time.time() if now is None else now)
        payload = {"sub": subject, "iat": issued, "exp": issued + int(lifetime), **claims}
        return jwt.encode(payload, self.private_key, algorithm="RS256", headers={"kid": self.kid})


def write_jwks(path: Path, keys: Sequence[SigningKey]) -> Path:
    path.write_text(json.dumps({"keys": [key.jwk() for key in keys]}))
    return path


@dataclass
class TokenRequest:
    """One request the endpoint received: the client id, whether its secret matched, the form it posted."""

    client_id: str
    authenticated: bool
    form: dict[str, str]


class TokenEndpoint:
    """An OAuth token endpoint on 127.0.0.1 (a thread): the client-credentials grant with HTTP Basic client
    authentication, as Kafka's ``HttpAccessTokenRetriever`` and kafkaguard's proxy call it.

    Each good request gets a new token for subject ``client_id`` signed by ``key``, with ``expires_in`` =
    ``lifetime``. ``fail_with`` set to an HTTP status answers every request with it (an OAuth error body).
    """

    def __init__(self, key: SigningKey, clients: dict[str, str], *, lifetime: float = 300.0,
                 claims: dict[str, Any] | None = None) -> None:  # fmt: skip
        self.key = key
        self.clients = clients
        self.lifetime = lifetime
        self.claims = claims or {}
        self.fail_with: int | None = None
        self.requests: list[TokenRequest] = []
        self.issued: list[str] = []
        self._lock = threading.Lock()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                endpoint._answer(self)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="token-endpoint", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/token"

    def __enter__(self) -> TokenEndpoint:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:  # fmt: skip
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)

    def _answer(self, handler: BaseHTTPRequestHandler) -> None:
        body = handler.rfile.read(int(handler.headers.get("Content-Length", "0"))).decode()
        form = dict(urllib.parse.parse_qsl(body))
        client_id, secret = _basic_credentials(handler.headers.get("Authorization", ""))
        authenticated = client_id in self.clients and self.clients[client_id] == secret
        with self._lock:
            self.requests.append(TokenRequest(client_id, authenticated, form))
            fail_with = self.fail_with
        if fail_with is not None:
            self._send(handler, fail_with, {"error": "temporarily_unavailable", "error_description": "down for a test"})
        elif not authenticated:
            self._send(handler, 401, {"error": "invalid_client", "error_description": "bad client credentials"})
        elif form.get("grant_type") != "client_credentials":
            self._send(handler, 400, {"error": "unsupported_grant_type"})
        else:
            claims = self.claims | ({"scope": form["scope"]} if "scope" in form else {})
            token = self.key.sign(client_id, lifetime=self.lifetime, jti=uuid.uuid4().hex, **claims)  # each new
            with self._lock:
                self.issued.append(token)
            self._send(handler, 200, {"access_token": token, "token_type": "Bearer", "expires_in": self.lifetime})

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, status: int, document: dict[str, Any]) -> None:
        data = json.dumps(document).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)


def _basic_credentials(header: str) -> tuple[str, str]:
    """(client_id, client_secret) of ``Basic base64(urlencode(id):urlencode(secret))`` (RFC 6749 §2.3.1)."""
    scheme, _, encoded = header.partition(" ")
    if scheme != "Basic":
        return "", ""
    try:
        decoded = base64.b64decode(encoded).decode()
    except ValueError:
        return "", ""
    client_id, _, secret = decoded.partition(":")
    return urllib.parse.unquote_plus(client_id), urllib.parse.unquote_plus(secret)
