"""TLS files reloaded while serving: a renewed certificate, key, CA bundle or revocation list is taken up by the next
TLS handshake without a restart; connections already open keep the context they shook hands with.

Worked example (a listener's certificate renewed by cert-manager or certbot)::

    tls = ReloadingContext("SASL_SSL listener", build, (certfile, keyfile, cafile))  # built once: a bad file stops
    tls.current                  # the context a new connection's handshake uses (``ListeningServer._hand_over``)
    # certfile and keyfile are replaced; within tls_reload_interval_seconds:
    await tls.check()            # True: "SASL_SSL listener: TLS files reloaded; certificate CN=broker ..."
    # a broken replacement (bad PEM, a key of another certificate, a half-written file):
    await tls.check()            # False: one warning saying why; ``current`` stays the previous context, and the
                                 # files are tried again when they change again

**Why polling ``stat``.** A change is seen by comparing each file's (mtime, size, inode) with the last look: one
``stat`` per file every few seconds, microseconds each, and it sees every way a file is replaced (rewritten in
place, renamed over, a Kubernetes secret's symlink swap, which changes the inode). inotify would need a dependency,
misses the symlink swap unless the directory is watched, and does not exist on every platform; a few seconds'
delay is nothing next to a certificate's lifetime.

**A file set that does not load keeps the old context.** The new context is built in a worker thread (reading and
checking the files: about a millisecond, never on the event loop), and taken only if it builds and the files did not
change while it was built (a copy still being written is tried again at the next look). Nothing about the files'
contents but the certificate's subject, issuer and notAfter is logged; a key password never is.

**Expiry on /metrics.** Given a ``TlsStatistics`` and a label (the listener's protocol), a context records its
certificate's notAfter when built and at each reload it takes, and counts reloads taken and refused:
``kafkaguard_tls_certificate_expiry_seconds{listener}`` and ``kafkaguard_tls_reloads_total{listener,result}``. The
notAfter is read in the same worker thread as the build (one PEM parse).

Cost model: per look, one ``stat`` per file; per change, one context build in a thread; per connection, one
attribute read (``current``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
from collections.abc import Callable, Sequence
from pathlib import Path

from cryptography import x509

from kafkaguard.audit.records.tls_certificates import ReloadResult, TlsStatistics
from kafkaguard.errors import InvalidConfigError

log = logging.getLogger(__name__)

#: One file's identity and version as ``stat`` sees it: (inode, size, mtime in ns); None: it cannot be read.
_Stamp = tuple[int, int, int] | None


def stamps(paths: Sequence[Path]) -> tuple[_Stamp, ...]:
    """Each file's (inode, size, mtime); symlinks followed (a secret volume's swap changes the target)."""
    found: list[_Stamp] = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            found.append(None)
        else:
            found.append((st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(found)


def not_after(certfile: Path) -> float | None:
    """The first certificate of ``certfile``'s notAfter in POSIX seconds; None if it cannot be read (the context
    that loaded it decides whether the file is good: this only feeds ``/metrics``)."""
    try:
        certificate = x509.load_pem_x509_certificate(certfile.read_bytes())
    except (OSError, ValueError):
        return None
    return certificate.not_valid_after_utc.timestamp()


def describe_certificate(certfile: Path) -> str:
    """The first certificate of ``certfile``: subject, issuer and notAfter (for the log; nothing secret)."""
    try:
        certificate = x509.load_pem_x509_certificate(certfile.read_bytes())
    except (OSError, ValueError) as e:
        return f"(its certificate cannot be described: {e})"
    return (
        f"certificate {certificate.subject.rfc4514_string()}, issuer {certificate.issuer.rfc4514_string()}, "
        f"notAfter {certificate.not_valid_after_utc.isoformat()}"
    )


class ReloadingContext:
    """One TLS context, rebuilt by ``build`` when one of ``paths`` changes (``check``); ``current`` is the one new
    connections use. ``name`` says whose it is in the log ("SASL_SSL listener", "upstream"); with ``statistics``,
    its certificate's notAfter and its reloads are recorded there under ``label``."""

    def __init__(
        self,
        name: str,
        build: Callable[[], ssl.SSLContext],
        paths: Sequence[Path],
        *,
        certfile: Path | None,
        statistics: TlsStatistics | None = None,
        label: str = "",
    ) -> None:
        self.name = name
        self._build = build
        self._paths = tuple(paths)
        self._certfile = certfile
        self._statistics = statistics
        self._label = label or name
        self._seen = stamps(self._paths)
        #: The context the next handshake uses.
        self.current, expiry = self._load()  # at start a bad file stops the start (InvalidConfigError)
        self._record_expiry(expiry)
        #: Successful reloads and refused ones since the start (for tests and the log).
        self.reloads = 0
        self.refused = 0

    def _load(self) -> tuple[ssl.SSLContext, float | None]:
        """The context and its certificate's notAfter (a worker thread's work after the start)."""
        context = self._build()
        return context, None if self._certfile is None else not_after(self._certfile)

    def _record_expiry(self, expiry: float | None) -> None:
        if self._statistics is not None and expiry is not None:
            self._statistics.serving(self._label, expiry)

    def _count(self, result: ReloadResult) -> None:
        if self._statistics is not None:
            self._statistics.reloaded(self._label, result)

    async def check(self) -> bool:
        """Rebuild the context if a file changed since the last look; True if a new one is now ``current``."""
        now = stamps(self._paths)
        if now == self._seen:
            return False
        self._seen = now
        try:
            context, expiry = await asyncio.to_thread(self._load)
        except InvalidConfigError as e:
            self.refused += 1
            self._count(ReloadResult.REFUSED)
            log.warning(
                "%s: the changed TLS files do not load, still serving the previous certificate: %s "
                "(tried again when they change)",
                self.name,
                e,
            )
            return False
        if stamps(self._paths) != now:
            self._seen = ()  # changed while it was read (a copy still being written): look again next time
            return False
        self.current = context
        self.reloads += 1
        self._record_expiry(expiry)
        self._count(ReloadResult.OK)
        described = "" if self._certfile is None else f"; {describe_certificate(self._certfile)}"
        log.info("%s: TLS files reloaded for new connections%s", self.name, described)
        return True


async def watch(contexts: Sequence[ReloadingContext], interval_seconds: float) -> None:
    """Look at every context's files every ``interval_seconds`` until cancelled (the owner's task)."""
    while True:
        await asyncio.sleep(interval_seconds)
        for context in contexts:
            try:
                await context.check()
            except Exception:
                # a bug here must not end the watch (the files keep being served as they are)
                log.exception("%s: cannot check the TLS files", context.name)
