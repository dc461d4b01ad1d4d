"""``kafkaguard console``: the REST console alone against a data directory; and the composition that
``kafkaguard serve --http-listener`` uses to run the Kafka server and the console in one event loop.

Both share one ``Services``: a change made through REST is in the Kafka server's authorizer when the response is
sent, and a change made by a Kafka client is visible to the next REST request. Alone, the console follows other
processes' changes to the store every ``sync_interval_seconds``, as the Kafka server does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated

import typer

from kafkaguard.bootstrap import Services, build_services
from kafkaguard.cli import options as o
from kafkaguard.config import Settings, load_settings
from kafkaguard.config.sections import ConsoleSettings
from kafkaguard.errors import InvalidConfigError
from kafkaguard.node.signals import run_until_signalled

if TYPE_CHECKING:
    from kafkaguard.console import HttpListener
    from kafkaguard.node.listening import ListeningServer

log = logging.getLogger(__name__)

DEFAULT_HTTP_LISTENER = "127.0.0.1:8080"


def _http_listener(settings: ConsoleSettings) -> HttpListener:
    from kafkaguard.console import HttpListener

    if settings.http_listener is None:
        raise InvalidConfigError("http_listener is not set")
    return HttpListener.parse(settings.http_listener)


async def run_console(settings: Settings) -> None:
    """The console alone until SIGTERM/SIGINT, polling the store for other processes' changes."""
    from kafkaguard.console import ConsoleServer, create_app

    listener = _http_listener(ConsoleSettings.of(settings))
    services = await asyncio.to_thread(build_services, settings)
    console = ConsoleServer(create_app(services, sync_store=True), listener)
    try:
        await run_until_signalled(console)
    finally:
        services.close()


class ServerWithConsole:
    """The Kafka server and the console on one ``Services``, in the running event loop."""

    def __init__(self, services: Services, server_type: Callable[[Services], ListeningServer] | None = None) -> None:
        from kafkaguard.console import ConsoleServer, create_app  # the console extra, imported only to serve
        from kafkaguard.server.app import KafkaServer  # the server extra, imported only to serve

        self.services = services
        self.server = (server_type or KafkaServer)(services)
        from kafkaguard.node.workers import in_worker

        self.console = ConsoleServer(
            create_app(services),
            _http_listener(services.sections.console),
            reuse_port=in_worker(),  # one of several workers serving the node's ports (node.workers)
        )
        self._metrics_task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """:raises InvalidConfigError: a listener cannot be bound (nothing is left running)."""
        await self.server.start()
        try:
            await self.console.start()
        except BaseException:
            await self.server.stop()
            raise
        self._start_worker_metrics()

    def _start_worker_metrics(self) -> None:
        """One of several workers: publish this worker's metrics, and answer /metrics with every worker's."""
        from kafkaguard.console.dependencies import ConsoleState
        from kafkaguard.node.worker_metrics import worker_metrics
        from kafkaguard.node.workers import worker_number

        state: ConsoleState = self.console.app.state.console
        shared = worker_metrics(worker_number(), state.metrics.render_own)
        if shared is not None:
            state.metrics.combine = shared.answer
            self._metrics_task = asyncio.create_task(shared.run(), name="worker-metrics")

    async def drain(self) -> None:
        """The Kafka listeners drain first, the console after them within the same ``shutdown_grace_seconds``: its
        ``/healthz`` answers 503 "draining" all the while the Kafka connections finish."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.services.sections.listening.shutdown_grace_seconds
        await self.server.drain()
        await self.console.drain(deadline)

    def hurry(self) -> None:
        self.server.hurry()
        self.console.hurry()

    async def stop(self) -> None:
        if self._metrics_task is not None:
            self._metrics_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._metrics_task
            self._metrics_task = None
        await self.console.stop()
        await self.server.stop()


async def serve_with_console(
    settings: Settings,
    server_type: Callable[[Services], ListeningServer] | None = None,
    *,
    reload_settings: Callable[[], Settings] | None = None,
) -> None:
    """What ``kafkaguard serve --http-listener`` (and ``proxy --http-listener``, with its ``server_type``) runs: both
    until SIGTERM/SIGINT, then a drain and a clean shutdown; with ``reload_settings``, a SIGHUP applies the live
    settings again (``ListeningServer.reload``)."""
    services = await asyncio.to_thread(build_services, settings)
    try:
        both = ServerWithConsole(services, server_type)
        reloads: set[asyncio.Task[None]] = set()

        def hangup() -> None:
            if reload_settings is not None:
                task = asyncio.get_running_loop().create_task(both.server.reload(reload_settings), name="sighup-reload")
                reloads.add(task)
                task.add_done_callback(reloads.discard)

        await run_until_signalled(both, on_hangup=hangup if reload_settings is not None else None)
    finally:
        services.close()


def console(
    data_dir: o.DataDir = None,
    store: o.StoreOption = None,
    http_listener: Annotated[
        str | None, typer.Option(help=f"host:port to serve the console on. Default: {DEFAULT_HTTP_LISTENER}")
    ] = None,
    super_users: o.SuperUsers = None,
    allow_everyone_if_no_acl_found: o.AllowEveryone = None,
    trusted_proxies: o.TrustedProxies = None,
    config: o.ConfigFile = None,
    log_level: o.LogLevel = "INFO",
) -> None:
    """Run the REST console and web page alone against a data directory (the Kafka server may run elsewhere)."""

    def settings() -> Settings:
        loaded = load_settings(
            config,
            data_dir=data_dir,
            store=store,
            http_listener=http_listener,
            super_users=super_users,
            allow_everyone_if_no_acl_found=allow_everyone_if_no_acl_found,
            trusted_proxies=trusted_proxies or None,
        )
        if loaded.http_listener is None:
            return loaded.model_copy(update={"http_listener": DEFAULT_HTTP_LISTENER})
        return loaded

    o.run_service(log_level, settings, run_console)
