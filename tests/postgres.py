"""A real PostgreSQL for the tests: Debian's binaries, a private port on 127.0.0.1, a private data directory, SCRAM
passwords over TCP, started once per session and stopped at its end (``pg_ctl stop -m fast``, then a kill).

``initdb`` and ``postgres`` refuse to run as root. As root (a CI machine, a container), the server runs as the
system user ``kafkaguard-pg`` (created with ``useradd --system`` if missing) in a directory under /tmp that this
user owns: pytest's own temporary directories are private to root, and the server cannot enter them. The
defaults are kept (``fsync=on``, ``synchronous_commit=on``): the durability tests rely on them.

Each test gets its own database (``fresh_database``), so tests share the server but never its data. The tests
that need PostgreSQL are not skipped when it is missing: they fail and say to run ``scripts/setup``.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

PG_USER = "kafkaguard-pg"
#: The database role the tests connect as (the cluster's superuser) and its password.
ROLE = "kafkaguard"
PASSWORD = "pg-test-secret"  # noqa: S105 - a throwaway test cluster's password


def find_bin_dir() -> Path:
    """The directory of ``initdb``, ``pg_ctl`` and ``postgres``; fails the test (never skips) when absent."""
    found = shutil.which("initdb")
    candidates = [Path(found).resolve().parent] if found else []
    # Debian puts them under /usr/lib/postgresql/<major>/bin, off PATH: the newest major first.
    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: _major(p.parent.name), reverse=True)
    for directory in candidates:
        if all((directory / name).exists() for name in ("initdb", "pg_ctl", "postgres")):
            return directory
    pytest.fail("PostgreSQL (initdb, pg_ctl, postgres) is not installed: run scripts/setup (as root it installs "
                "Debian's postgresql package)", pytrace=False)  # fmt: skip


def _major(name: str) -> int:
    return int(name) if name.isdigit() else 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresServer:
    """One PostgreSQL cluster in a temporary directory, run as an unprivileged user when we are root."""

    def __init__(self) -> None:
        self.bin_dir = find_bin_dir()
        self.port = _free_port()
        self.as_root = os.geteuid() == 0
        self.root = Path(tempfile.mkdtemp(prefix="kafkaguard-pg-"))
        self.data = self.root / "data"
        self.sockets = self.root / "sockets"
        self.log = self.root / "postgres.log"
        self._names = itertools.count(1)
        if self.as_root:
            _ensure_user()
            self.root.chmod(0o755)
        self.sockets.mkdir()
        pwfile = self.root / "pwfile"
        pwfile.write_text(PASSWORD + "\n")
        if self.as_root:
            for path in (self.root, self.sockets, pwfile):
                shutil.chown(path, PG_USER, PG_USER)
        self._run(
            "initdb", "-D", str(self.data), "-U", ROLE, f"--pwfile={pwfile}", "--auth-host=scram-sha-256",
            "--auth-local=trust", "--encoding=UTF8", "--no-instructions",
        )  # fmt: skip
        pwfile.unlink()
        self.start()

    def _run(self, program: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = [str(self.bin_dir / program), *args]
        if self.as_root:
            command = ["runuser", "-u", PG_USER, "--", *command]
        return subprocess.run(command, capture_output=True, text=True, check=check, cwd=self.root, timeout=120)

    def start(self) -> None:
        options = f"-p {self.port} -k {self.sockets} -c listen_addresses=127.0.0.1 -c max_connections=300"
        done = self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "start", check=False)
        if done.returncode != 0:
            raise RuntimeError(f"pg_ctl start failed: {done.stdout}{done.stderr}\n{self.log_tail()}")

    def stop(self) -> None:
        """``pg_ctl stop -m fast`` (every connection is cut), waiting until it is down."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop", check=False)

    def destroy(self) -> None:
        self.stop()
        pid_file = self.data / "postmaster.pid"
        if pid_file.exists():  # pg_ctl could not stop it: kill the postmaster we started
            with contextlib.suppress(OSError, ValueError):
                os.kill(int(pid_file.read_text().split()[0]), 9)
        shutil.rmtree(self.root, ignore_errors=True)

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def url(self, database: str) -> str:
        """The store URL of ``database``: no password (the tests pass ``PASSWORD`` apart, as kafkaguard wants)."""
        return f"postgresql://{ROLE}@127.0.0.1:{self.port}/{database}"

    def conninfo(self, database: str = "postgres") -> str:
        return f"host=127.0.0.1 port={self.port} user={ROLE} password={PASSWORD} dbname={database}"

    def create_database(self) -> str:
        name = f"kg_{os.getpid()}_{next(self._names)}"
        with psycopg.connect(self.conninfo(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"'.encode())
        return name

    def drop_database(self, name: str) -> None:
        with psycopg.connect(self.conninfo(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'.encode())

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                psycopg.connect(self.conninfo(), connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)


def _ensure_user() -> None:
    try:
        pwd.getpwnam(PG_USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", PG_USER],
            check=True,
            capture_output=True,
        )


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    server = PostgresServer()
    try:
        yield server
    finally:
        server.destroy()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> Iterator[str]:
    """A fresh, empty database of the session's server, as a store URL (no password in it), dropped afterwards."""
    name = postgres_server.create_database()
    yield postgres_server.url(name)
    postgres_server.drop_database(name)
