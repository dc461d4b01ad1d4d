"""The PostgreSQL store's address: ``postgresql://user@host:port/database[?option=value&...]``, never a password.

The URL is shown in logs, reprs and error messages, so it may not carry the password: one in the URL is refused,
and the password comes separately (``KAFKAGUARD_STORE_PASSWORD`` or ``store_password_file``, read by the
configuration layer and handed here as a plain string). ``StoreUrl`` keeps the password out of its ``repr`` and
``str``; only ``conninfo()`` puts it into the libpq connection string handed to psycopg. Parsing needs no psycopg
(the configuration checks a URL whether or not the ``postgresql`` extra is installed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qsl, unquote, urlsplit

from kafkaguard.errors import InvalidConfigError

SCHEMES = ("postgresql", "postgres")
DEFAULT_PORT = 5432
#: libpq options that carry secrets: refused in the URL's query as the password is.
_SECRET_OPTIONS = frozenset({"password", "passfile", "sslpassword"})


def is_store_url(text: str) -> bool:
    """True when ``text`` names a PostgreSQL store rather than a directory."""
    return text.split("://", 1)[0].lower() in SCHEMES and "://" in text


@dataclass(frozen=True, slots=True)
class StoreUrl:
    """A parsed store URL, and the password to connect with (never shown)."""

    user: str
    host: str
    port: int
    database: str
    options: tuple[tuple[str, str], ...] = ()
    password: str | None = field(default=None, repr=False, compare=False)

    @classmethod
    def parse(cls, text: str, *, password: str | None = None) -> StoreUrl:
        """``postgresql://user@host:port/database``; port 5432 when left out; query options are libpq's
        (``sslmode=verify-full``, ``connect_timeout=5``, …).

        :raises InvalidConfigError: not such a URL, or one carrying a password (the message never shows it).
        """
        if not is_store_url(text):
            raise InvalidConfigError("the store must be a URL postgresql://user@host:port/database")
        parts = urlsplit(text)
        userinfo, _, hostport = parts.netloc.rpartition("@")
        # What the messages show: the URL with the user but without any password or query.
        shown = f"{parts.scheme}://{userinfo.partition(':')[0]}{'@' if userinfo else ''}{hostport}{parts.path}"
        if ":" in userinfo or any(k in _SECRET_OPTIONS for k, _ in parse_qsl(parts.query)):
            raise InvalidConfigError(
                f"the store URL {shown} must not contain a password (it would be shown in logs): set "
                "KAFKAGUARD_STORE_PASSWORD or store_password_file instead"
            )
        try:
            port = parts.port or DEFAULT_PORT
        except ValueError:
            raise InvalidConfigError(f"the store URL {shown}: the port is not a number in 1..65535") from None
        user, host, database = unquote(parts.username or ""), unquote(parts.hostname or ""), unquote(parts.path[1:])
        if not user or not host or not database or "/" in database:
            raise InvalidConfigError(
                f"the store URL {shown} must name a user, a host and a database: postgresql://user@host:port/database"
            )
        return cls(user, host, port, database, tuple(parse_qsl(parts.query)), password)

    def with_password(self, password: str | None) -> StoreUrl:
        return StoreUrl(self.user, self.host, self.port, self.database, self.options, password)

    def conninfo(self) -> str:
        """The libpq connection string, with the password: for psycopg only, never to be logged."""
        from psycopg.conninfo import make_conninfo  # here, so that parsing a URL (config) needs no psycopg

        options = dict(self.options)
        if self.password is not None:
            options["password"] = self.password
        return make_conninfo("", user=self.user, host=self.host, port=str(self.port), dbname=self.database, **options)

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        query = "&".join(f"{k}={v}" for k, v in self.options)
        return f"postgresql://{self.user}@{host}:{self.port}/{self.database}" + (f"?{query}" if query else "")

    def scrub(self, message: str) -> str:
        """``message`` with the password (should a driver ever echo it) replaced by ``***``."""
        return message.replace(self.password, "***") if self.password else message
