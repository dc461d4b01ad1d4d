"""A store proxy for proving that a code path reads no store: every call fails once the proxy is closed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class GuardedStore:
    """Forwards every method call to ``store`` until ``closed`` is set; then each call raises AssertionError
    naming the method (and is still counted in ``refused``)."""

    def __init__(self, store: object) -> None:
        self._store = store
        self.closed = False
        self.refused: list[str] = []

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._store, name)
        if not callable(attribute):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            if self.closed:
                self.refused.append(name)
                raise AssertionError(f"store.{name} was called")
            return attribute(*args, **kwargs)

        guarded: Callable[..., Any] = call
        return guarded
