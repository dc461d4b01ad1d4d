"""A writer the durability test kills with SIGKILL: ``python -m tests.store.durability_child DB START``, where DB is
an SQLite file or a PostgreSQL store URL (its password in ``KAFKAGUARD_STORE_PASSWORD``).

After each call returns it prints one acknowledgement line (flushed), so every line the parent reads is a change
the store acknowledged. ``?`` lines announce a change before it is attempted (it may or may not land):

    A n        ACL on topic t<n> created
    D? n / D n ACL on topic t<n> about to be deleted / deleted
    C? u i / C u i   credential of user u about to be set / set to i iterations
"""

from __future__ import annotations

import os
import sys

from kafkaguard.scram import ScramMechanism
from kafkaguard.service import CredentialService, ScramUpsertion
from kafkaguard.store import SqliteStore, Store, is_store_url
from tests.actors import ACTOR
from tests.store.helpers import acl, acl_filter


def open_store(path: str) -> Store:
    if is_store_url(path):
        from kafkaguard.store.postgres import PostgresStore

        return PostgresStore(path, password=os.environ["KAFKAGUARD_STORE_PASSWORD"])
    return SqliteStore(path)


def main(path: str, start: int) -> None:
    store = open_store(path)
    credentials = CredentialService(store)
    out = sys.stdout
    out.write("ready\n")
    out.flush()
    n = start
    while True:
        store.create_acls([acl(f"t{n}", f"User:u{n % 5}")])
        out.write(f"A {n}\n")
        out.flush()
        if n % 3 == 0 and n - 2 >= start:
            out.write(f"D? {n - 2}\n")
            out.flush()
            store.delete_acls([acl_filter(f"t{n - 2}")])
            out.write(f"D {n - 2}\n")
            out.flush()
        user, iterations = f"u{n % 7}", 4096 + n % 10000
        out.write(f"C? {user} {iterations}\n")
        out.flush()
        upsertion = ScramUpsertion(
            user=user,
            mechanism=ScramMechanism.SCRAM_SHA_256,
            iterations=iterations,
            salt=b"durability-salt!",
            salted_password=b"p" * 32,
        )
        result = credentials.alter(upsertions=[upsertion], actor=ACTOR)[0]
        if not result.succeeded:
            raise SystemExit(f"unexpected {result}")
        out.write(f"C {user} {iterations}\n")
        out.flush()
        n += 1


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
