"""The actor of a CLI command that writes the store itself (``users``, ``groups``, ``store migrate``).

Such a command has no login: the principal is the operating-system user who ran it, ``User:<login name>``, the
address is ``local`` (``LOCAL_ADDRESS``: the change came from no network address, the command opened the store on
the machine it ran on; a host name there would read as the address of a client, one that never connected), and the
request id is one random id per run, shared by every event of that run (so the history groups what one command
did). The commands that go through Kafka (``acls``, ``apply``) are actors of the Kafka door instead: their SASL
principal, their address, and their client id (``kafkaguard-acls``, ``kafkaguard-apply``) in the request id.
"""

from __future__ import annotations

import getpass
import uuid

from kafkaguard.model import Actor

#: The address of a command that writes the store itself (see the module docstring).
LOCAL_ADDRESS = "local"


def cli_actor(interface: str = "cli") -> Actor:
    """This run's actor (see the module docstring); ``interface``: ``cli`` or ``migrate``."""
    try:
        login = getpass.getuser()
    except (KeyError, OSError):  # no login name for this uid (a container's arbitrary uid)
        login = "unknown"
    return Actor(principal=f"User:{login}", address=LOCAL_ADDRESS, interface=interface, request_id=uuid.uuid4().hex)
