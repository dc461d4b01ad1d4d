"""One racer of the two-process topic test: ``python -m tests.service.topic_race_child DB GO_FILE COUNT``.

It opens its own store, prints ``ready``, waits until GO_FILE exists, then builds its topic service (which reads,
or for a new store writes, the cluster id) and creates topics ``race-0`` … ``race-<COUNT-1>``, one request each,
and prints one JSON line: the cluster id and, per topic, the error code it got.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from kafkaguard.service import NewTopic, TopicService
from kafkaguard.store import SqliteStore
from tests.actors import ACTOR
from tests.service.outcomes import code_of


def main(path: str, go_file: str, count: int) -> None:
    with SqliteStore(path) as store:
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        while not Path(go_file).exists():
            time.sleep(0.001)
        service = TopicService(store)
        cluster_id = service.cluster_id()
        codes = {
            f"race-{i}": int(code_of(service.create_topics([NewTopic(name=f"race-{i}")], actor=ACTOR)[0]))
            for i in range(count)
        }
        sys.stdout.write(json.dumps({"cluster_id": cluster_id, "codes": codes}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
