"""cProfile for a benchmarked server: switched on and off in the server's event-loop thread over a control pipe,
and its hot spots rendered as a Markdown table of file:function shares of the busy time.

The server process answers the commands ``PROFILE_START`` and ``PROFILE_STOP`` (with the path to dump the stats
to) through a ``LoopProfiler``, in the thread that reads the control pipe: that is the event loop's thread, so
only what runs on the loop is profiled (work handed to ``asyncio.to_thread`` workers is not). The load generator
sends them around a scenario, reads the dump with ``pstats`` and turns it into a ``Profile`` with ``summarize``;
``render_profiles`` makes the report's tables.

Idle time (the loop waiting in ``epoll.poll`` or ``select``) is left out of the busy time, so a share is of the
time the loop actually worked: 40% in ``kio`` means 40% of the work, however idle the server was.
"""

from __future__ import annotations

import cProfile
import pstats
from dataclasses import dataclass
from typing import Any

#: The control-pipe commands a ``LoopProfiler`` answers.
PROFILE_START = "profile-start"
PROFILE_STOP = "profile-stop"


class LoopProfiler:
    """The server side: one cProfile session at a time, in the thread that calls ``handle``."""

    commands = frozenset({PROFILE_START, PROFILE_STOP})

    def __init__(self) -> None:
        self._profiler: cProfile.Profile | None = None

    def handle(self, command: str, arg: Any) -> tuple[str, Any]:
        """The answer to send back for ``command``: ``PROFILE_START`` starts a session, ``PROFILE_STOP`` ends it
        and dumps its stats to the path ``arg``; anything else (a stop with no session running) is an error."""
        if command == PROFILE_START:
            self._profiler = cProfile.Profile()
            self._profiler.enable()
            return ("ok", None)
        if command == PROFILE_STOP and self._profiler is not None:
            self._profiler.disable()
            self._profiler.dump_stats(arg)
            self._profiler = None
            return ("ok", arg)
        return ("error", command)


def _label(func: tuple[str, int, str]) -> str:
    filename, _line, name = func
    if filename == "~":
        return name.replace("<", "").replace(">", "")
    for marker in ("/site-packages/", "/src/", "/lib/python3.11/"):
        if marker in filename:
            filename = filename.split(marker, 1)[1]
            break
    return f"{filename}:{name}"


def _is_idle(func: tuple[str, int, str]) -> bool:
    return func[0] == "~" and ("poll' of 'select.epoll" in func[2] or "select.select" in func[2])


def _area(func: tuple[str, int, str]) -> str:
    filename = func[0]
    if filename == "~":
        name = func[2]
        if "sqlite3" in name:
            return "sqlite3 (C)"
        if "socket" in name or "send" in name or "recv" in name:
            return "socket I/O (C)"
        return "other built-ins (C)"
    for area in ("kafkaguard/server", "kafkaguard/authorizer", "kafkaguard/scram", "kafkaguard/store", "kafkaguard"):
        if f"/{area}/" in filename:
            return area
    for area in ("kio", "asyncio", "dataclasses", "enum", "hmac", "logging", "ipaddress"):
        if f"/{area}/" in filename or filename.endswith(f"/{area}.py"):
            return area
    return "other Python"


#: asyncio functions whose cumulative time is the server's per-request overhead, shown next to its own code.
_ASYNCIO_CUMULATIVE = frozenset({"wait_for", "readexactly", "drain"})


@dataclass
class Profile:
    scenario: str
    busy_s: float
    idle_share: float
    top_self: list[tuple[str, float]]  # (file:function, % of busy time), by self time
    top_cum: list[tuple[str, float]]  # kafkaguard/kio functions by cumulative time
    areas: list[tuple[str, float]]


def summarize(scenario: str, stats: pstats.Stats, n_self: int = 12, n_cum: int = 10) -> Profile:
    raw: dict[tuple[str, int, str], tuple[int, int, float, float, Any]] = stats.stats  # type: ignore[attr-defined]
    idle = sum(tt for func, (_cc, _nc, tt, _ct, _callers) in raw.items() if _is_idle(func))
    total = sum(tt for _cc, _nc, tt, _ct, _callers in raw.values())
    busy = max(total - idle, 1e-9)
    self_rows = sorted(((func, tt) for func, (_cc, _nc, tt, _ct, _c) in raw.items() if not _is_idle(func)),
                       key=lambda row: -row[1])  # fmt: skip
    skip_cum = ("Connection.run", "_accept", "Connection._handle", "run_forever", "_run_once", "Handle._run")
    cum_rows = sorted(
        (
            (func, ct)
            for func, (_cc, _nc, _tt, ct, _c) in raw.items()
            if ("/kafkaguard/" in func[0] or "/kio/" in func[0] or func[2] in _ASYNCIO_CUMULATIVE)
            and not any(s.split(".")[-1] == func[2] for s in skip_cum)
        ),
        key=lambda row: -row[1],
    )
    areas: dict[str, float] = {}
    for func, (_cc, _nc, tt, _ct, _c) in raw.items():
        if not _is_idle(func):
            areas[_area(func)] = areas.get(_area(func), 0.0) + tt
    merged: dict[str, float] = {}
    for func, tt in self_rows:
        merged[_label(func)] = merged.get(_label(func), 0.0) + tt
    top_self = sorted(merged.items(), key=lambda row: -row[1])[:n_self]
    return Profile(
        scenario,
        busy,
        idle / total if total else 0.0,
        [(label, 100 * tt / busy) for label, tt in top_self],
        [(_label(func), 100 * ct / busy) for func, ct in cum_rows[:n_cum]],
        sorted(((area, 100 * tt / busy) for area, tt in areas.items()), key=lambda row: -row[1]),
    )


def render_profiles(profiles: list[Profile]) -> list[str]:
    """Markdown for each profile: a line of its busy time and areas, then its self and cumulative hot spots."""
    lines: list[str] = []
    for p in profiles:
        lines += [
            "",
            f"**{p.scenario}** — {p.busy_s:.2f} s busy, idle {100 * p.idle_share:.0f}% of the profiled time. "
            "By area: " + ", ".join(f"{area} {share:.0f}%" for area, share in p.areas[:7]) + ".",
            "",
            "| self time | % | cumulative (kafkaguard, kio, asyncio `wait_for`/`readexactly`/`drain`) | % |",
            "|---|---:|---|---:|",
        ]
        for i in range(max(len(p.top_self), len(p.top_cum))):
            s = p.top_self[i] if i < len(p.top_self) else ("", float("nan"))
            c = p.top_cum[i] if i < len(p.top_cum) else ("", float("nan"))
            s_pct = f"{s[1]:.1f}" if s[0] else ""
            c_pct = f"{c[1]:.1f}" if c[0] else ""
            lines.append(f"| `{s[0]}` | {s_pct} | `{c[0]}` | {c_pct} |" if c[0] else f"| `{s[0]}` | {s_pct} | | |")
    return lines
