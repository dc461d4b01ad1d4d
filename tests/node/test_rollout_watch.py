"""``node.rollout_watch`` and the settings around it: the shadow file loaded at start (a bad one stops the start with
the file's own error), reloaded when it changes (a broken edit keeps the previous set), permissive announced at
WARNING, refused where it means nothing (``serve``) or proves nothing (no audit log); ``/healthz`` and ``/metrics``
show both."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from kafkaguard.bootstrap import Services, build_services
from kafkaguard.cli.aclfile import load_acl_file
from kafkaguard.config import load_settings
from kafkaguard.console import create_app
from kafkaguard.errors import InvalidConfigError
from kafkaguard.node.rollout_watch import PERMISSIVE_WARNING, RolloutWatch
from kafkaguard.server.app import KafkaServer

CANDIDATE = """\
principals:
  User:alice:
    consumer:
      topics: [orders]
      groups: [billing]
"""


def _services(tmp_path: Path, **settings: Any) -> Services:
    return build_services(load_settings(None, data_dir=tmp_path / "data", audit_log=tmp_path / "audit.log",
                                        **settings))  # fmt: skip


@pytest.fixture
def shadow_file(tmp_path: Path) -> Path:
    path = tmp_path / "candidate.yaml"
    path.write_text(CANDIDATE)
    return path


@pytest.fixture
def services(tmp_path: Path, shadow_file: Path) -> Iterator[Services]:
    built = _services(tmp_path, shadow_acls=shadow_file)
    yield built
    built.close()


def test_the_shadow_file_is_loaded_at_start_and_reloaded_when_it_changes(services: Services, shadow_file: Path):
    async def go() -> None:
        watch = RolloutWatch(services, load_acl_file, poll_seconds=3600)
        watch.start()
        try:
            shadow = services.rollout.shadow
            assert shadow is not None and shadow.acl_count == 3  # READ, DESCRIBE on orders; READ on billing
            assert not await watch.check()  # unchanged: not read again
            shadow_file.write_text(CANDIDATE + "  User:bob:\n    consumer:\n      topics: [pii]\n")
            os.utime(shadow_file, ns=(1, 1))  # a distinct modification time, whatever the clock's resolution
            assert await watch.check()
            assert services.rollout.shadow is not None and services.rollout.shadow.acl_count == 5
        finally:
            await watch.stop()

    asyncio.run(go())


def test_a_broken_edit_keeps_the_previous_shadow_set(
    services: Services, shadow_file: Path, caplog: pytest.LogCaptureFixture
):
    async def go() -> None:
        watch = RolloutWatch(services, load_acl_file, poll_seconds=3600)
        watch.start()
        try:
            before = services.rollout.shadow
            shadow_file.write_text(
                "principals:\n  User:alice:\n    acls:\n      - topic: x\n        operations: [Fly]\n"
            )
            os.utime(shadow_file, ns=(2, 2))
            with caplog.at_level(logging.ERROR):
                assert not await watch.check()
            assert services.rollout.shadow is before
            assert "candidate.yaml" in caplog.text and "previous shadow ACL set stays" in caplog.text
        finally:
            await watch.stop()

    asyncio.run(go())


def test_a_bad_shadow_file_stops_the_start_naming_the_file_and_the_problem(services: Services, shadow_file: Path):
    shadow_file.write_text("principals:\n  User:alice:\n    acls:\n      - topic: x\n        operations: [Fly]\n")
    with pytest.raises(InvalidConfigError, match=r"shadow_acls .*candidate\.yaml.*Fly"):
        RolloutWatch(services, load_acl_file).start()
    assert services.rollout.shadow is None


def test_a_missing_shadow_file_stops_the_start(tmp_path: Path):
    built = _services(tmp_path, shadow_acls=tmp_path / "nowhere.yaml")
    try:
        with pytest.raises(InvalidConfigError, match=r"nowhere\.yaml"):
            RolloutWatch(built, load_acl_file).start()
    finally:
        built.close()


def test_permissive_is_announced_at_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture):
    built = _services(tmp_path, enforcement="permissive")

    async def go() -> None:
        watch = RolloutWatch(built, None, warn_seconds=0.01)
        with caplog.at_level(logging.WARNING, logger="kafkaguard.node.rollout_watch"):
            watch.start()
            await asyncio.sleep(0.2)  # the reminder repeats
            await watch.stop()

    try:
        asyncio.run(go())
    finally:
        built.close()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and r.getMessage() == PERMISSIVE_WARNING]
    assert len(warnings) >= 2
    assert "PERMISSIVE" in PERMISSIVE_WARNING


def test_permissive_needs_an_audit_log():
    with pytest.raises(InvalidConfigError, match="enforcement permissive needs an audit trail"):
        load_settings(None, enforcement="permissive")
    with pytest.raises(InvalidConfigError, match="shadow_acls needs an audit trail"):
        load_settings(None, shadow_acls="acls.yaml")


def test_serve_refuses_permissive(tmp_path: Path):
    built = _services(tmp_path, enforcement="permissive")
    try:
        with pytest.raises(InvalidConfigError, match="permissive is for kafkaguard proxy only"):
            KafkaServer(built)
    finally:
        built.close()


async def started_and_stopped(watch: RolloutWatch) -> None:
    watch.start()
    await watch.stop()


def console_get(services: Services, *paths: str) -> list[httpx.Response]:
    """GET ``paths`` from the console app of ``services``, in process (ASGI)."""

    async def go() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=create_app(services))
        async with httpx.AsyncClient(transport=transport, base_url="http://console") as client:
            return [await client.get(path) for path in paths]

    return asyncio.run(go())


def test_healthz_and_metrics_show_permissive_and_the_shadow_set(tmp_path: Path, shadow_file: Path):
    built = _services(tmp_path, enforcement="permissive", shadow_acls=shadow_file)
    try:
        asyncio.run(started_and_stopped(RolloutWatch(built, load_acl_file)))  # the shadow set stays loaded
        built.rollout.would_be_denials = 3
        built.rollout.shadow_newly_denied = 2
        health, metrics_ = console_get(built, "/healthz", "/metrics")
        assert (health.json()["enforcement"], health.json()["shadow_acls"]) == ("permissive", 3)
        metrics = metrics_.text
        assert "kafkaguard_enforcement_permissive 1.0" in metrics
        assert "kafkaguard_permissive_would_be_denials_total 3.0" in metrics
        assert "kafkaguard_shadow_acls 3.0" in metrics
        assert 'kafkaguard_shadow_flips_total{direction="newly_denied"} 2.0' in metrics
    finally:
        built.close()


def test_healthz_and_metrics_say_enforcing_by_default(tmp_path: Path):
    built = _services(tmp_path)
    try:
        health, metrics = console_get(built, "/healthz", "/metrics")
        assert (health.json()["enforcement"], health.json()["shadow_acls"]) == ("enforcing", None)
        assert "kafkaguard_enforcement_permissive 0.0" in metrics.text
    finally:
        built.close()
