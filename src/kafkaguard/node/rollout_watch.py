"""The serving side of ``authorizer.rollout``: loads the shadow ACL file and follows its changes, and keeps saying
that enforcement is permissive while it is.

* The shadow file is read with the loader the CLI hands in (``cli.aclfile.load_acl_file``: the format ``kafkaguard
  apply`` reads; this layer does not parse YAML). At start a bad file stops the server with the file's own error;
  afterwards the file is polled (size and modification time, every ``poll_seconds``) and a changed file is loaded
  off the event loop and swapped in whole. A file that no longer loads keeps the previous candidate set and logs
  why: an edit in progress must not silently end the shadow evidence. Polling rather than SIGHUP: an operator (or
  a config-management tool) only has to write the file, and every node notices.
* Permissive enforcement is announced at WARNING at start and again every ``warn_seconds``, so nobody runs it by
  accident for long; ``/healthz`` and ``/metrics`` show it too (``console``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from kafkaguard.authorizer.rollout import shadow_set
from kafkaguard.bootstrap import Services
from kafkaguard.errors import InvalidConfigError, KafkaguardError
from kafkaguard.model import AclBinding

log = logging.getLogger(__name__)

#: path → the bindings of an ACL file (``cli.aclfile.load_acl_file``); raises ``KafkaguardError`` with the reasons.
AclFileLoader = Callable[[Path], Sequence[AclBinding]]

PERMISSIVE_WARNING = (
    "enforcement is PERMISSIVE: requests the ACLs deny are forwarded anyway and audited as DENIED with "
    '"enforced": false (kafkaguard\'s own APIs, logins and limits stay enforced); set enforcement: enforcing '
    "once the audit shows no unexpected denials"
)


class RolloutWatch:
    def __init__(
        self,
        services: Services,
        loader: AclFileLoader | None,
        *,
        poll_seconds: float = 2.0,
        warn_seconds: float = 300.0,
    ) -> None:
        self.services = services
        self.path = services.sections.authorization.shadow_acls
        if self.path is not None and loader is None:
            raise InvalidConfigError("shadow_acls is set but this server cannot read ACL files")
        self._loader = loader
        self._poll_seconds = poll_seconds
        self._warn_seconds = warn_seconds
        self._seen: tuple[int, int] | None = None
        self._loaded = False
        self._tasks: list[asyncio.Task[None]] = []

    def load(self) -> None:
        """Load the shadow file now, if one is set: a bad one raises ``InvalidConfigError`` (the server calls this
        when it is made, before it binds a listener or the proxy reaches its upstream)."""
        if self.path is not None:
            self._seen = _signature(self.path)
            self._load()
            self._loaded = True

    def start(self) -> None:
        """Load the shadow file if ``load`` did not (a bad one raises ``InvalidConfigError``) and start following
        it; warn if permissive."""
        if self.path is not None:
            if not self._loaded:
                self.load()
            self._tasks.append(asyncio.create_task(self._follow(), name="shadow-acls"))
        if self.services.rollout.permissive:
            log.warning(PERMISSIVE_WARNING)
            self._tasks.append(asyncio.create_task(self._remind(), name="permissive-warning"))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()

    async def check(self) -> bool:
        """Reload the shadow file if it changed since last seen; True when a new set was swapped in."""
        if self.path is None:
            return False
        seen = _signature(self.path)
        if seen == self._seen:
            return False
        self._seen = seen
        try:
            await asyncio.to_thread(self._load)
        except InvalidConfigError as e:
            log.error("%s; the previous shadow ACL set stays in use", e)
            return False
        return True

    def _load(self) -> None:
        """:raises InvalidConfigError: the file cannot be read or is not a valid ACL file (every problem listed)."""
        assert self.path is not None and self._loader is not None  # noqa: S101 - start() checked both
        try:
            bindings = self._loader(self.path)
        except (KafkaguardError, OSError) as e:
            raise InvalidConfigError(f"shadow_acls {self.path}: {e}") from None
        authorizer = self.services.authorizer
        candidate = shadow_set(
            str(self.path),
            bindings,
            super_users=authorizer.super_users,
            allow_everyone_if_no_acl_found=authorizer.allow_everyone_if_no_acl_found,
            memberships=authorizer.memberships,
        )
        self.services.rollout.shadow = candidate
        log.info("shadow ACLs: %d ACL(s) from %s decided beside the active ones", candidate.acl_count, self.path)

    async def _follow(self) -> None:
        while True:
            await asyncio.sleep(self._poll_seconds)
            await self.check()

    async def _remind(self) -> None:
        while True:
            await asyncio.sleep(self._warn_seconds)
            log.warning(PERMISSIVE_WARNING)


def _signature(path: Path) -> tuple[int, int] | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_size, stat.st_mtime_ns
