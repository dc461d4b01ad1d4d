"""The second process of the two-process topic test: ``python -m tests.service.topic_follower_child DB``.

It opens its own store and topic service, creates topic ``from-child``, prints ``ready``, then polls every 10 ms
and prints ``topics <names>`` (its catalog's names, sorted, comma-separated) whenever they change, flushed. It
runs until killed.
"""

from __future__ import annotations

import sys
import time

from kafkaguard.service import NewTopic, TopicService
from kafkaguard.store import SqliteStore
from tests.actors import ACTOR


def main(path: str) -> None:
    service = TopicService(SqliteStore(path))
    service.create_topics([NewTopic(name="from-child")], actor=ACTOR)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    last: str | None = None
    while True:
        service.poll()
        names = ",".join(d.name or "" for d in service.describe())
        if names != last:
            sys.stdout.write(f"topics {names}\n")
            sys.stdout.flush()
            last = names
        time.sleep(0.01)


if __name__ == "__main__":
    main(sys.argv[1])
