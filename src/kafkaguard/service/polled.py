"""What a service that keeps a snapshot of one kind of stored state does when ``kafkaguard.following`` polls it.

Worked example: the credential service's snapshot is at version 7; another process changes a password (the store's
credential version becomes 8). The next ``poll`` reads 8 ≠ 7 and ``sync``s (a full reload); the one after reads 8 = 8
and does nothing else.

Cost model: a poll is one version read from the store; a reload only when that version moved.
"""

from __future__ import annotations

from abc import ABC, abstractmethod


class Polled(ABC):
    """A service whose ``version`` follows one version counter of the store (credentials, memberships, quotas)."""

    @property
    @abstractmethod
    def version(self) -> int:
        """The store's version the in-memory snapshot reflects."""

    @abstractmethod
    def _stored_version(self) -> int:
        """The store's version now (one cheap read).

        :raises StoreError: the store cannot be read.
        """

    @abstractmethod
    def sync(self) -> None:
        """Reload the whole kind from the store.

        :raises StoreError: the store cannot be read.
        """

    def poll(self) -> bool:
        """Catch up if another process changed this kind of stored state since the last look; one cheap read when
        nothing changed. True if the snapshot was reloaded. Call it from a worker thread, not an event loop.

        :raises StoreError: the store cannot be read.
        """
        if self._stored_version() == self.version:
            return False
        self.sync()
        return True
