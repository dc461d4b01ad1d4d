"""``kafkaguard serve``: a ``ListeningServer`` (``node.listening``) whose connections are answered by kafkaguard's
own handlers (``dispatch``), as the cluster's only broker and its controller."""

from __future__ import annotations

from kafkaguard.config import Listener
from kafkaguard.node.listening import ListeningServer
from kafkaguard.protocol.scope import ListenerContext
from kafkaguard.server.dispatch import ServerDispatcher


class KafkaServer(ListeningServer):
    SERVED_BY = "kafkaguard serve"

    def dispatcher(self, listener: Listener, context: ListenerContext) -> ServerDispatcher:
        return ServerDispatcher(context)
