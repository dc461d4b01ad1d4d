"""The second process of the two-process test: ``python -m tests.service.follower_child DB``.

It opens its own store and authorizer, creates one ACL of its own (topic ``from-child``), then polls every 10 ms
and prints, whenever its authorizer's view changes, ``acls <names>`` and ``allowed <names>`` (the topics
User:alice may READ according to its authorizer), flushed. It runs until killed.
"""

from __future__ import annotations

import sys
import time

from kafkaguard import (
    AclOperation,
    Action,
    AuthorizationResult,
    RequestContext,
    ResourcePattern,
    ResourceType,
    StandardAuthorizer,
)
from kafkaguard.service import AclService
from kafkaguard.store import SqliteStore
from tests.actors import ACTOR
from tests.store.helpers import acl

ALICE = RequestContext("User:alice", "10.0.0.1")


def main(path: str) -> None:
    service = AclService(SqliteStore(path), StandardAuthorizer())
    service.create_acls([acl("from-child")], actor=ACTOR)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    last: tuple[str, str] | None = None
    while True:
        service.poll()
        authorizer = service.authorizer
        names = sorted({a.binding.pattern.name for a in authorizer.stored_acls()})
        allowed = [
            name
            for name in names
            if authorizer.authorize_one(ALICE, Action(AclOperation.READ, ResourcePattern(ResourceType.TOPIC, name)))
            is AuthorizationResult.ALLOWED
        ]
        view = (",".join(names), ",".join(allowed))
        if view != last:
            sys.stdout.write(f"acls {view[0]}\nallowed {view[1]}\n")
            sys.stdout.flush()
            last = view
        time.sleep(0.01)


if __name__ == "__main__":
    main(sys.argv[1])
