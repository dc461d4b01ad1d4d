"""``explain_in`` remembered per snapshot, for the audit writer: the same caller asking the same action again.

An audit record names the deciding rule, which ``authorize_in`` does not compute (it answers with a bit mask, see
``authorizer.index``): ``explain_in`` walks the resource's relevant ACL groups again and sorts the matching ones into
Kafka's scan order. In ``usage`` mode every allowed decision is recorded, and the traffic that makes most of them
is a few producers and consumers repeating the same (principal, host, action) thousands of times a second.

Worked example: a consumer polls ``orders`` 500 times a second. Its first Fetch asks ``explain_in`` for
(``User:alice``, ``10.0.0.7``, READ ``orders``) and keeps the Decision; the other 499 find it with one dict probe.
An ACL change swaps the authorizer's snapshot: the first request decided with another snapshot than the memo's
clears it, so a decision is only ever reused within the snapshot that made it.

Cost model: a hit is one hash of (context, action) and a dict probe, against an ``explain_in`` that walks the
resource's relevant ACLs (it grows with them, the memo does not; with a handful, several times a hit: see
docs/benchmarks.md, "Figures from the code").
Memory: at most ``max_entries`` decisions (~1 KB each with their matching ACL tuples shared with the snapshot); past
the bound the memo is cleared and refills, so an attacker cycling client addresses costs a miss per request, never
memory.

Not thread-safe, by design: one memo belongs to one audit writer thread.
"""

from __future__ import annotations

from kafkaguard.authorizer.rules import Decision
from kafkaguard.authorizer.standard import AuthorizerSnapshot, explain_in
from kafkaguard.model import Action, RequestContext

DEFAULT_MAX_ENTRIES = 4096


class DecisionMemo:
    """``explain(snapshot, context, action)`` = ``explain_in(snapshot, context, action)``, remembered for the
    snapshot it was last asked with."""

    def __init__(self, max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries must be at least 1, got {max_entries}")
        self._max_entries = max_entries
        self._snapshot: AuthorizerSnapshot | None = None
        self._decisions: dict[tuple[RequestContext, Action], Decision] = {}

    def explain(self, snapshot: AuthorizerSnapshot, context: RequestContext, action: Action) -> Decision:
        if snapshot is not self._snapshot:
            self._snapshot = snapshot
            self._decisions.clear()
        key = (context, action)
        decision = self._decisions.get(key)
        if decision is None:
            decision = explain_in(snapshot, context, action)
            if len(self._decisions) >= self._max_entries:
                self._decisions.clear()
            self._decisions[key] = decision
        return decision

    def __len__(self) -> int:
        return len(self._decisions)
