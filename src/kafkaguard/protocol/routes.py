"""Handlers registered with their API's types: ``route(api, handler)``, where ``api`` is one of the generated
``Api`` constants (``protocol.messages.DESCRIBE_ACLS``, ``proxy.messages.PRODUCE`` …) that carry the unions of
the API's request and response classes over the versions offered.

Why: a dispatch table maps an ``ApiKey`` to a handler, so the table alone says nothing about which body a handler
gets. ``route`` makes mypy check each handler's request parameter against its API's request union (a handler of
Produce typed with Fetch's request, or with one version's class only, is an error), and ``Api.response`` gives a
decoded answer its API's response union. The unions come from the same versions the codec decodes at
(``scripts/gen_messages.py`` renders them from ``SERVER_VERSIONS`` / ``CAPS``; tests/protocol/test_messages.py
checks they are current), so the one ``cast`` of each below is what the codec already guarantees, said once here
instead of at every handler.

Cost: nothing per request. ``route`` runs at import and returns the handler itself (dispatch calls it with no
frame in between); ``Api.response`` is one call returning its argument.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar, cast

from kio.static.protocol import Entity

from kafkaguard.authorizer.requests import ApiKey

RequestT = TypeVar("RequestT", covariant=True)
ResponseT = TypeVar("ResponseT", covariant=True)
ScopeT = TypeVar("ScopeT")
BodyT = TypeVar("BodyT")
AnswerT = TypeVar("AnswerT")


@dataclass(frozen=True, slots=True)
class Api(Generic[RequestT, ResponseT]):
    """One API with, as type parameters only mypy reads, the unions of its request and response classes over the
    versions offered; at run time its key alone."""

    key: ApiKey

    def response(self, entity: Entity) -> ResponseT:
        """``entity``, decoded with this API's response schema at an offered version, as the API's response union.

        The ``cast`` is the codec's guarantee (see the module docstring), not a guess: kio's decoder is untyped
        per version (``response_schema`` looks the class up at run time)."""
        return cast(ResponseT, entity)

    def request(self, entity: Entity) -> RequestT:
        """``entity``, decoded with this API's request schema at an offered version (``codec.decode_body``), as the
        API's request union: the same guarantee as ``response``'s, for a body decoded after its handler began
        (``proxy.produce_request``: Produce decoded whole only to be rebuilt)."""
        return cast(RequestT, entity)


#: A handler as a dispatch table holds it: its body decoded by the codec for the key it is registered under.
Routed = Callable[[ScopeT, Entity], Awaitable[AnswerT]]


def route(
    api: Api[BodyT, object], handler: Callable[[ScopeT, BodyT], Awaitable[AnswerT]]
) -> tuple[ApiKey, Routed[ScopeT, AnswerT]]:
    """``handler`` under ``api``'s key: mypy checks that it takes ``api``'s request union (or wider)."""
    # The table's one erasure: dispatch decodes a body with the schema of the key it looks the handler up by, so
    # the body is of ``api``'s request union (module docstring); the handler itself is stored, not a wrapper.
    return api.key, cast(Routed[ScopeT, AnswerT], handler)


def routes(*entries: tuple[ApiKey, Routed[ScopeT, AnswerT]]) -> dict[ApiKey, Routed[ScopeT, AnswerT]]:
    """A dispatch table of ``route`` entries.

    :raises ImportError: two handlers for one API (checked at import, as the tables' other checks)."""
    table = dict(entries)
    if len(table) != len(entries):
        keys = [key for key, _handler in entries]
        raise ImportError(f"APIs routed twice: {sorted({k.api_name for k in keys if keys.count(k) > 1})}")
    return table
