"""Serve a console app with uvicorn inside an existing event loop (beside the Kafka server, or alone).

``ConsoleServer.start()`` binds and returns once the listener accepts; ``stop()`` shuts down gracefully (requests
in flight get up to 5 s); ``drain()`` is a SIGTERM's: ``/healthz`` answers 503 "draining" (``service.readiness``),
then the listener closes, idle keep-alive connections are closed and the requests in flight get until the drain's
deadline (``shutdown_grace_seconds``; ``hurry()``: at once). Beside a Kafka server the console drains after it, so
that a balancer asking ``/healthz`` sees "draining" while the Kafka connections finish. Signals are left to the
owner of the loop: uvicorn's own handlers would replace the process's, and re-raise the signal after shutting down.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import socket
from collections.abc import Generator
from dataclasses import dataclass

import uvicorn
from fastapi import FastAPI

from kafkaguard.console.dependencies import ConsoleState
from kafkaguard.errors import InvalidConfigError

log = logging.getLogger(__name__)

_HTTP_LISTENER = re.compile(r"^(?:(?P<scheme>https?)://)?(?P<host>\[[0-9a-fA-F:.]+\]|[^:/\s\[\]]*):(?P<port>\d{1,5})$")
START_TIMEOUT_SECONDS = 15.0


@dataclass(frozen=True, slots=True)
class HttpListener:
    host: str
    port: int

    @classmethod
    def parse(cls, text: str) -> HttpListener:
        """``host:port`` (``[::1]:8080``; an ``http://`` prefix is accepted; port 0 = any free port).

        :raises InvalidConfigError: anything else.
        """
        match = _HTTP_LISTENER.match(text.strip())
        if match is None or match["scheme"] == "https":
            raise InvalidConfigError(f"http_listener {text!r} is not host:port, for example 127.0.0.1:8080")
        port = int(match["port"])
        if port > 65535:
            raise InvalidConfigError(f"http_listener {text!r}: port {port} is above 65535")
        return cls(match["host"].strip("[]") or "127.0.0.1", port)


def _shared_socket(listener: HttpListener) -> socket.socket:
    """A listening socket of ``listener`` bound with SO_REUSEPORT (uvicorn's own binding has no such option).

    :raises OSError: it cannot be bound.
    """
    family, kind, proto, _, address = socket.getaddrinfo(
        listener.host, listener.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(address)
        sock.listen(2048)
    except BaseException:
        sock.close()
        raise
    return sock


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


class ConsoleServer:
    def __init__(self, app: FastAPI, listener: HttpListener, *, reuse_port: bool = False) -> None:
        """``reuse_port``: the port is shared with other processes serving the same node (SO_REUSEPORT,
        ``node.workers``); each scrape or request is answered by one of them."""
        config = uvicorn.Config(
            app,
            host=listener.host,
            port=listener.port,
            log_config=None,
            access_log=False,
            lifespan="on",
            server_header=False,
            timeout_graceful_shutdown=5,
            # X-Forwarded-For is believed only from the app's trusted_proxies (create_app); uvicorn's default would
            # believe it from loopback, so any local process could claim any client address.
            proxy_headers=False,
        )
        self.app = app
        self._server = _Server(config)
        self._task: asyncio.Task[None] | None = None
        self.listener = listener
        self._reuse_port = reuse_port

    @property
    def port(self) -> int:
        """The bound port (the real one when the listener asked for port 0)."""
        return int(self._server.servers[0].sockets[0].getsockname()[1])

    @property
    def url(self) -> str:
        host = f"[{self.listener.host}]" if ":" in self.listener.host else self.listener.host
        return f"http://{host}:{self.port}"

    async def start(self) -> None:
        """:raises InvalidConfigError: the listener cannot be bound or the app fails to start."""
        self._task = asyncio.create_task(self._serve(), name="console")
        deadline = asyncio.get_running_loop().time() + START_TIMEOUT_SECONDS
        while not self._server.started:
            if self._task.done() or asyncio.get_running_loop().time() > deadline:
                await self.stop()
                raise InvalidConfigError(f"the console cannot listen on {self.listener.host}:{self.listener.port}")
            await asyncio.sleep(0.01)
        log.info("console listening on %s", self.url)

    async def _serve(self) -> None:
        try:
            if self._reuse_port:
                try:
                    sock = _shared_socket(self.listener)
                except OSError as e:
                    log.error("the console cannot listen on %s:%d: %s", self.listener.host, self.listener.port, e)
                    return
                await self._server.serve(sockets=[sock])
            else:
                await self._server.serve()
        except SystemExit:  # uvicorn exits this way when it cannot bind or its lifespan fails
            log.error("the console could not start on %s:%d", self.listener.host, self.listener.port)

    async def drain(self, deadline: float | None = None) -> None:
        """Not ready, then shut down with the requests in flight answered until ``deadline`` (the loop's time;
        None: ``shutdown_grace_seconds`` from now); ``stop`` follows."""
        state: ConsoleState = self.app.state.console
        loop = asyncio.get_running_loop()
        if deadline is None:
            deadline = loop.time() + state.services.sections.listening.shutdown_grace_seconds
        if state.services.readiness.drain():
            log.info("draining: /healthz answers 503 from now")
        task = self._task
        if task is None:
            return
        self._server.config.timeout_graceful_shutdown = None  # the deadline below bounds it
        self._server.should_exit = True
        try:
            async with asyncio.timeout_at(deadline):
                await asyncio.shield(task)  # a timeout must not cancel uvicorn's shutdown: it is told to hurry
        except TimeoutError:
            log.info("console: the requests still in flight at the drain's deadline are cut off")
            self.hurry()
            await task
        self._task = None

    def hurry(self) -> None:
        """End a shutdown under way at once: the requests in flight are cancelled and their connections closed, as
        uvicorn does at its own graceful timeout (its ``force_exit`` would skip the app's lifespan shutdown too)."""
        state = self._server.server_state
        for task in list(state.tasks):
            task.cancel()
        for connection in list(state.connections):
            connection.transport.close()

    async def stop(self) -> None:
        self._server.should_exit = True
        if self._task is not None:
            await self._task
            self._task = None
