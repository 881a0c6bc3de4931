"""When the file broker's ``run()`` and ``watch()`` make their next pass over the directory.

With inotify (``magw.sources.file.dirwatch``): at once after an event on a document's name (a touch only when it
renews a stale Endpoint file: ``touch_wakes``), when the next Endpoint document goes stale (its heartbeat TTL runs
out: time passing is not an event), and at least every ``rescan_interval`` seconds (a slow full pass, which also
reads the heartbeats of fresh files, and sees changes inotify does not report: a network filesystem written by
another host, a directory replaced under a bind mount). Without inotify, every ``poll_interval`` seconds, as before.

The broker falls back to polling, and says so once (``filebroker.polling``), when inotify cannot be had: the user's
inotify instances or watches are used up (``fs.inotify.max_user_instances``, ``max_user_watches``), or the system
has none. While the directory does not exist it polls, and arms the watch once the directory is there; a watch
lost because the directory was removed or moved is armed again the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
from collections.abc import Callable

import structlog

from magw.sources.file.dirwatch import DirWatch

log = structlog.get_logger(__name__)

Opener = Callable[[str | os.PathLike[str], tuple[str, ...]], DirWatch]

TURNED_OFF = "inotify turned off (use_inotify=False)"
_NOT_YET = (errno.ENOENT, errno.ENOTDIR)  # the directory is not there (yet): poll, and try again next time


class Wakeup:
    """Arms the watch, and waits for the next reason to make a pass. Used on one event loop at a time."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        suffixes: tuple[str, ...],
        *,
        poll_interval: float,
        rescan_interval: float,
        use_inotify: bool,
        opener: Opener | None = None,
    ) -> None:
        self.directory = directory
        self._suffixes = suffixes
        self.poll_interval = poll_interval
        self.rescan_interval = rescan_interval
        self._opener: Opener = opener if opener is not None else DirWatch
        self._watch: DirWatch | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._event = asyncio.Event()
        self.polling_reason: str | None = None if use_inotify else TURNED_OFF
        self._logged_mode: str | None = None
        self.touch_wakes: frozenset[str] = frozenset()  # set by the broker after each pass: its stale files

    def arm(self) -> None:
        """Watch the directory if we do not yet, can, and it exists. Call before a pass, so that a change made
        during the pass wakes the next wait."""
        if self._watch is not None or self.polling_reason is not None:
            self._log_mode()
            return
        try:
            watch = self._opener(self.directory, self._suffixes)
        except OSError as exc:
            if exc.errno not in _NOT_YET:
                self.polling_reason = _reason(exc)
            self._log_mode()
            return
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(watch.fd, self._readable)
        self._watch = watch
        self._log_mode()

    def poke(self) -> None:
        """End the current wait now (the broker's ``stop()``)."""
        self._event.set()

    async def wait(self, next_expiry: float | None) -> None:
        """Until an event, ``poke()``, ``next_expiry`` seconds (None: no Endpoint to expire), or the interval."""
        if self._watch is None:
            timeout = self.poll_interval
        else:
            timeout = self.rescan_interval if next_expiry is None else min(self.rescan_interval, next_expiry)
        if not self._event.is_set() and timeout > 0:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._event.wait()
        self._event.clear()

    def close(self) -> None:
        self._disarm()

    def _readable(self) -> None:
        watch = self._watch
        if watch is None:
            return
        try:
            drained = watch.drain(self.touch_wakes)
        except OSError as exc:  # never seen; a watch we cannot read is a watch we cannot trust
            log.warning("filebroker.watch_failed", directory=str(self.directory), error=str(exc))
            self._disarm()
            self._event.set()
            return
        if drained.lost:
            log.info("filebroker.watch_lost", directory=str(self.directory), reason="directory removed or moved")
            self._disarm()
        if drained.relevant:
            self._event.set()

    def _disarm(self) -> None:
        watch, self._watch = self._watch, None
        if watch is None:
            return
        self._logged_mode = None  # a watch armed again is logged again
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(watch.fd)
        watch.close()

    def _log_mode(self) -> None:
        mode = "inotify" if self._watch is not None else "polling"
        if mode == self._logged_mode:
            return
        if self._watch is not None:
            log.info("filebroker.watching", directory=str(self.directory), rescan_interval=self.rescan_interval)
        elif self.polling_reason is not None:  # a warning, unless asked for
            level = log.info if self.polling_reason == TURNED_OFF else log.warning
            level("filebroker.polling", directory=str(self.directory), interval=self.poll_interval,
                  reason=self.polling_reason)  # fmt: skip
        else:
            return  # no directory yet: the broker's own filebroker.no_directory says so
        self._logged_mode = mode


def _reason(exc: OSError) -> str:
    if exc.errno == errno.EMFILE:
        return f"{exc.strerror or exc}: the user's inotify instances are used up (fs.inotify.max_user_instances)"
    if exc.errno == errno.ENOSPC:
        return f"{exc.strerror or exc}: the user's inotify watches are used up (fs.inotify.max_user_watches)"
    return str(exc)


def seconds_until(deadline: float | None, now: float) -> float | None:
    """Seconds from ``now`` to ``deadline`` (never negative); None stays None."""
    if deadline is None:
        return None
    return max(0.0, deadline - now)
