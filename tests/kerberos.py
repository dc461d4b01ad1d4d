"""A throw-away Kerberos world for the GSSAPI tests: MIT Kerberos's own KDC (Debian's ``krb5-kdc``, installed by
``scripts/setup``) on a free loopback port, serving two realms with a cross-realm trust between them.

``start_kdc`` writes a ``kdc.conf`` and a ``krb5.conf`` into its directory, creates both realms' databases
(``kdb5_util create -s``), the trust (``krbtgt/MAIN@OTHER`` in both, same password) and the service principal
``kafka/localhost@MAIN``, and starts ``krb5kdc`` for both realms in one process (TCP and UDP on the same port).
Principals are added on demand (``principal``: random keys, exported to a keytab of their own). Clients and
servers then find it through ``KRB5_CONFIG`` (``env``), each client with its own credential cache; the replay
cache stays in the directory too, so nothing is written outside it.

Every Kerberos client and server here names the service host ``localhost`` (the acceptor's principal is
``kafka/localhost@MAIN``): the krb5.conf turns off DNS canonicalisation and reverse lookups, so each library asks
for exactly that name, and ``[domain_realm]`` puts it in ``MAIN`` for clients of ``OTHER`` too.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

MAIN = "KAFKAGUARD.TEST"
OTHER = "OTHER.TEST"
SERVICE = "kafka"
SERVICE_HOST = "localhost"
SERVICE_PRINCIPAL = f"{SERVICE}/{SERVICE_HOST}@{MAIN}"
START_TIMEOUT = 15.0
_TOOLS = ("krb5kdc", "kdb5_util", "kadmin.local", "kinit")

#: The principal-to-local rules the GSSAPI tests serve with, on kafkaguard and on Kafka alike: no DEFAULT, so a
#: principal none of them maps is refused.
RULES = (
    f"RULE:[1:$1@$0](.*@{OTHER.replace('.', '[.]')})s/@.*//L",  # OTHER's users, lower-cased
    f"RULE:[2:$1_$2@$0](ops_.*@{OTHER.replace('.', '[.]')})s/@.*//U",  # OTHER's ops/… instances, upper-cased
    f"RULE:[1:$1@$0](mallory@{MAIN.replace('.', '[.]')})",  # a non-simple result: refused, later rules unasked
    "RULE:[2:$2@$1](.*@etl)s/@etl//L",  # etl/<job>: the job's name, lower-cased
    f"RULE:[2:$1@$0](svc@{MAIN.replace('.', '[.]')})s/@.*/-service/",
    f"RULE:[1:$1@$0](.*@{MAIN.replace('.', '[.]')})s/@.*//",  # MAIN's users as they are (DEFAULT's mapping)
)

#: (Kerberos principal, the User: name the rules give it, or None: refused).
CASES = (
    (f"alice@{MAIN}", "alice"),
    (f"Bob@{MAIN}", "Bob"),
    (f"CAROL@{MAIN}", "CAROL"),
    (f"ivan.smith@{MAIN}", "ivan.smith"),
    (f"judy_x-1@{MAIN}", "judy_x-1"),
    (f"dave/admin@{MAIN}", None),  # an instance no rule maps (no DEFAULT)
    (f"svc/host1.kafkaguard.test@{MAIN}", "svc-service"),
    (f"etl/Nightly-Batch@{MAIN}", "nightly-batch"),
    (f"mallory@{MAIN}", None),  # the third rule's result holds '@': no principal, the last rule is never asked
    (f"erin@{OTHER}", "erin"),
    (f"Frank@{OTHER}", "frank"),
    (f"KEN@{OTHER}", "ken"),
    (f"ops/Grace@{OTHER}", "OPS_GRACE"),
    (f"heidi/x@{OTHER}", None),  # another realm's instance no rule maps
    (f"Leo/Admin@{MAIN}", None),
    (f"svc/host2@{MAIN}", "svc-service"),
)
_SBIN = ("/usr/sbin", "/usr/bin", "/sbin")


class KdcUnavailable(Exception):
    """MIT Kerberos's KDC or tools are not installed."""


def tool(name: str) -> str:
    """The path of one of MIT Kerberos's programs (``/usr/sbin`` need not be on PATH).

    :raises KdcUnavailable: it is not installed.
    """
    found = shutil.which(name) or next((f"{d}/{name}" for d in _SBIN if os.access(f"{d}/{name}", os.X_OK)), None)
    if found is None:
        raise KdcUnavailable(f"{name} is missing: scripts/setup installs krb5-kdc, krb5-admin-server, krb5-user")
    return found


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class Kdc:
    """A running KDC for ``MAIN`` and ``OTHER`` (see the module docstring)."""

    directory: Path
    port: int
    process: subprocess.Popen[bytes] | None = None
    _keytabs: dict[str, Path] = field(default_factory=dict)

    @property
    def krb5_conf(self) -> Path:
        return self.directory / "krb5.conf"

    @property
    def kdc_conf(self) -> Path:
        return self.directory / "kdc.conf"

    @property
    def service_keytab(self) -> Path:
        """The keytab of ``kafka/localhost@MAIN`` (the broker's, kafkaguard's and the proxy's acceptor)."""
        return self.principal(SERVICE_PRINCIPAL)

    def env(self, ccache: Path | None = None) -> dict[str, str]:
        """What a Kerberos program needs to find this KDC (and, with ``ccache``, its own credential cache)."""
        env = {
            "KRB5_CONFIG": str(self.krb5_conf),
            "KRB5_KDC_PROFILE": str(self.kdc_conf),
            "KRB5RCACHENAME": f"file2:{self.directory / 'replay-cache'}",
            "KRB5_TRACE": str(self.directory / "trace.log"),
        }
        if ccache is not None:
            env["KRB5CCNAME"] = f"FILE:{ccache}"
        return env

    def kadmin(self, realm: str, query: str) -> str:
        """One ``kadmin.local`` query in ``realm``.

        :raises RuntimeError: it failed (with its output).
        """
        done = subprocess.run([tool("kadmin.local"), "-r", realm, "-q", query], env=os.environ | self.env(),
                              capture_output=True, text=True, timeout=30, check=False)  # fmt: skip
        if done.returncode != 0 or "error" in done.stderr.lower():
            raise RuntimeError(f"kadmin.local -r {realm} -q {query!r} failed: {done.stdout}{done.stderr}")
        return done.stdout

    def principal(self, principal: str) -> Path:
        """The keytab of ``principal`` (``name[/instance]@REALM``), created with a random key on first use."""
        keytab = self._keytabs.get(principal)
        if keytab is not None:
            return keytab
        realm = principal.rpartition("@")[2]
        keytab = self.directory / "keytabs" / (principal.replace("/", "_").replace("@", "_at_") + ".keytab")
        keytab.parent.mkdir(exist_ok=True)
        self.kadmin(realm, f"addprinc -randkey {principal}")
        self.kadmin(realm, f"ktadd -k {keytab} {principal}")
        self._keytabs[principal] = keytab
        return keytab

    def kinit(self, principal: str, ccache: Path) -> Path:
        """A credential cache holding ``principal``'s TGT, got with its keytab (``kinit -k -t``)."""
        keytab = self.principal(principal)
        done = subprocess.run([tool("kinit"), "-k", "-t", str(keytab), "-c", f"FILE:{ccache}", principal],
                              env=os.environ | self.env(), capture_output=True, text=True, timeout=30,
                              check=False)  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"kinit {principal} failed: {done.stdout}{done.stderr}")
        return ccache

    def jaas(self, principal: str) -> str:
        """A Java client's ``sasl.jaas.config`` logging in as ``principal`` with its keytab."""
        return (
            "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true useTicketCache=false "
            f'keyTab="{self.principal(principal)}" principal="{principal}";'
        )

    def stop(self) -> None:
        process = self.process
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


def _write_config(directory: Path, port: int) -> None:
    enctypes = "aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal"
    realms = "\n".join(
        f""" {realm} = {{
  database_name = {directory / realm / "principal"}
  key_stash_file = {directory / realm / "stash"}
  acl_file = {directory / "kadm5.acl"}
  max_life = 2h
  max_renewable_life = 0
  supported_enctypes = {enctypes}
 }}"""
        for realm in (MAIN, OTHER)
    )
    (directory / "kadm5.acl").write_text("")
    (directory / "kdc.conf").write_text(
        f"""[kdcdefaults]
 kdc_listen = 127.0.0.1:{port}
 kdc_tcp_listen = 127.0.0.1:{port}

[realms]
{realms}

[logging]
 kdc = FILE:{directory / "kdc.log"}
 default = FILE:{directory / "kdc.log"}
"""
    )
    (directory / "krb5.conf").write_text(
        f"""[libdefaults]
 default_realm = {MAIN}
 dns_lookup_realm = false
 dns_lookup_kdc = false
 dns_canonicalize_hostname = false
 rdns = false
 ignore_acceptor_hostname = false
 udp_preference_limit = 1
 forwardable = false
 ticket_lifetime = 1h
 permitted_enctypes = aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96
 default_tkt_enctypes = aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96
 default_tgs_enctypes = aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96

[realms]
 {MAIN} = {{
  kdc = 127.0.0.1:{port}
 }}
 {OTHER} = {{
  kdc = 127.0.0.1:{port}
 }}

[domain_realm]
 localhost = {MAIN}
 .localhost = {MAIN}
"""
    )


def start_kdc(directory: Path) -> Kdc:
    """Create both realms in ``directory`` and start the KDC (see the module docstring).

    :raises KdcUnavailable: MIT Kerberos's KDC is not installed.
    :raises RuntimeError: a realm could not be created or the KDC did not start (with its log).
    """
    for name in _TOOLS:
        tool(name)
    directory.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    _write_config(directory, port)
    kdc = Kdc(directory, port)
    for realm in (MAIN, OTHER):
        (directory / realm).mkdir()
        done = subprocess.run(
            [tool("kdb5_util"), "-r", realm, "create", "-s", "-P", "kafkaguard-test-master-key"],
            env=os.environ | kdc.env(), capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"kdb5_util create -r {realm} failed: {done.stdout}{done.stderr}")
    for realm in (MAIN, OTHER):  # the trust: OTHER's clients get MAIN's services (the same key in both realms)
        kdc.kadmin(realm, f"addprinc -pw kafkaguard-test-trust krbtgt/{MAIN}@{OTHER}")
    with (directory / "krb5kdc.err").open("wb") as errors:  # the child keeps its own descriptor
        kdc.process = subprocess.Popen(
            [tool("krb5kdc"), "-n", "-r", MAIN, "-r", OTHER, "-P", str(directory / "krb5kdc.pid")],
            env=os.environ | kdc.env(), stdout=subprocess.DEVNULL, stderr=errors,
        )  # fmt: skip
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if kdc.process.poll() is not None:
            break
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            time.sleep(0.1)  # waiting for the KDC's listener, bounded by the deadline
    else:
        kdc.stop()
        raise RuntimeError(f"krb5kdc did not listen within {START_TIMEOUT:g} s")
    if kdc.process.poll() is not None:
        log = (directory / "krb5kdc.err").read_text(errors="replace") + (directory / "kdc.log").read_text(
            errors="replace"
        )
        raise RuntimeError(f"krb5kdc exited: {log[-3000:]}")
    return kdc


@contextmanager
def kerberos_env(kdc: Kdc, ccache: Path | None = None) -> Iterator[None]:
    """``kdc.env(ccache)`` in this process's environment for the block (the in-process server and the gssapi and
    kafka-python clients read it), restored after."""
    saved: Mapping[str, str | None] = {name: os.environ.get(name) for name in kdc.env(ccache)}
    os.environ.update(kdc.env(ccache))
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@pytest.fixture(scope="session")
def kdc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kdc]:
    """The session's KDC (see the module docstring); stopped at the end."""
    try:
        running = start_kdc(tmp_path_factory.mktemp("kdc"))
    except KdcUnavailable as e:
        pytest.fail(f"the Kerberos tests need MIT Kerberos's KDC: {e}")
    try:
        yield running
    finally:
        running.stop()
