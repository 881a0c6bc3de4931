"""The file broker: a directory of YAML documents as the state feed of one cluster.

Standalone and lab deployments share state through a directory: the lab (or an operator) writes Cluster, Config and
Node documents; each gateway daemon publishes its own Endpoint document; Health is optional. ``FileBroker`` lists the
directory (``os.scandir`` with inode, mtime and size) when inotify reports an event on a document, when an Endpoint's
heartbeat TTL runs out, and at least every ``rescan_interval`` (1 s); without inotify, every ``poll_interval`` (30 ms)
(``magw.sources.file.wakeup``). It re-reads only files whose stamp changed, re-parses only files whose content changed
(a digest of the bytes: a heartbeat touch changes the mtime, not the content), and re-assembles the Snapshot of its
local cluster (``magw.sources.file.assemble``) only when some content changed or an Endpoint expired or came back, and
then re-parses only the items that changed (``magw.snapshot.cache``: unchanged clusters keep their Cluster objects). A
bad file or document is logged with its file name and left out; its last good version stays in use.

Threads: ``run()`` and ``watch()`` do the listing, reading, parsing and
assembling in one dedicated worker thread, so the event loop (health probes
with 20 ms deadlines) is not held up by a rescan; listeners are called on the
loop's thread. ``scan()`` is the same pass, synchronous, in the caller's thread.

Endpoint heartbeat: with ``endpoint_ttl`` set, an Endpoint document whose file
was not modified (written or touched) for longer than that is treated as gone
(``filebroker.endpoint_expired``), and comes back when its file is touched
again. The gateway daemon touches its document every second, so a gateway
whose daemon died drops out of every cluster's snapshot (docs/health.md), unless
no other Endpoint of its cluster is fresh: then it is kept
(``filebroker.endpoint_stale_kept``; fail static, magw.sources.file.expiry).

Writers must replace files atomically (temp file + rename, as
``publish_endpoint`` does) or a reader may see half a file; a half file that does
not parse is treated as bad until it is complete.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import attrs
import structlog

from magw.model import Snapshot
from magw.snapshot.cache import SnapshotParser
from magw.snapshot.load import SnapshotError
from magw.sources.file.assemble import Assembly, Ident, Parse, Problem, assemble
from magw.sources.file.dirwatch import is_document_name
from magw.sources.file.documents import Document, DocumentError, parse_file
from magw.sources.file.expiry import Expiry, endpoint_clusters, expiry
from magw.sources.file.wakeup import Wakeup, seconds_until

log = structlog.get_logger(__name__)

Stamp = tuple[int, int, int]  # inode, mtime_ns, size
Listener = Callable[[Snapshot | None], None]

SUFFIXES = (".yaml", ".yml")


@attrs.frozen(kw_only=True)
class _FileState:
    stamp: Stamp
    digest: bytes | None = None  # of the file's bytes; None when they could not be read
    docs: tuple[Document, ...] = ()
    error: str | None = None


@attrs.frozen(kw_only=True)
class _View:
    """What consumers read, replaced as a whole (the worker thread writes it, the loop reads it)."""

    snapshot: Snapshot | None = None
    accepted: tuple[Document, ...] = ()
    synced: bool = False


def _read(path: Path, name: str, stamp: Stamp, previous: _FileState | None) -> tuple[_FileState, bool]:
    """The file's state, and whether its content changed; parsed only when it did."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        return _FileState(stamp=stamp, error=f"{name}: cannot read: {exc}"), True
    digest = hashlib.blake2b(data, digest_size=16).digest()
    if not data.strip():  # writers replace files by rename and delete by unlink: an empty one is cut short
        return _FileState(stamp=stamp, digest=digest, error=f"{name}: empty (cut short?)"), True
    if previous is not None and previous.digest == digest:  # touched (heartbeat) or rewritten with the same text
        return attrs.evolve(previous, stamp=stamp), False
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return _FileState(stamp=stamp, digest=digest, error=f"{name}: cannot read: {exc}"), True
    try:
        return _FileState(stamp=stamp, digest=digest, docs=parse_file(text, file=name)), True
    except DocumentError as exc:
        return _FileState(stamp=stamp, digest=digest, error=str(exc)), True


class FileBroker:
    """Watches ``directory`` and keeps the Snapshot of ``local_cluster`` up to date.

    ``snapshot`` is None until a valid Cluster document of the local cluster is
    there. ``initial_sync_done`` turns True after the first complete scan of the
    directory: only then do consumers know they have seen every document.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        local_cluster: str,
        poll_interval: float = 0.03,
        rescan_interval: float = 1.0,
        use_inotify: bool = True,
        parse: Parse | None = None,
        endpoint_ttl: float | None = None,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        if poll_interval <= 0:
            raise ValueError(f"poll_interval: must be > 0 seconds, got {poll_interval}")
        if not rescan_interval > 0:
            raise ValueError(f"rescan_interval: must be > 0 seconds, got {rescan_interval}")
        if endpoint_ttl is not None and not endpoint_ttl > 0:
            raise ValueError(f"endpoint_ttl: must be > 0 seconds (or None: never), got {endpoint_ttl}")
        self.directory = Path(directory)
        self.local_cluster = local_cluster
        self.poll_interval = poll_interval
        self.rescan_interval = rescan_interval
        self.use_inotify = use_inotify
        # None: a SnapshotParser of its own, which re-parses only what changed (magw.snapshot.cache)
        self._parse: Parse = parse if parse is not None else SnapshotParser()
        self.endpoint_ttl = endpoint_ttl
        self._wall_clock = wall_clock
        self._expiry = Expiry()
        self._next_stale: float | None = None  # wall clock: when the next fresh Endpoint file goes stale
        self._endpoint_files: dict[str, frozenset[str]] = {}  # file -> the clusters of its Endpoint documents
        self._files: dict[str, _FileState] = {}
        self._signature: tuple[tuple[str, Stamp], ...] | None = None
        self._last_good: dict[Ident, Document] = {}
        self._view = _View()
        self._problem_files: frozenset[str] = frozenset()
        self._listeners: list[Listener] = []
        self._logged: set[tuple[str, str]] = set()
        self._missing_logged: str | None = None
        self._dir_missing_logged = False
        self._stopping = False  # stop() was called: run() ends after its current pass
        self._lock = threading.Lock()  # one pass at a time: scan() and the worker thread never overlap
        self._executor: ThreadPoolExecutor | None = None
        self._wakeup: Wakeup | None = None

    @property
    def snapshot(self) -> Snapshot | None:
        return self._view.snapshot

    @property
    def initial_sync_done(self) -> bool:
        return self._view.synced

    def local_node_document(self, name: str) -> Mapping[str, Any] | None:
        """The accepted Node document of ``name`` in the local cluster (with broker-only fields like public_ip)."""
        for doc in self._view.accepted:
            if doc.ident == ("Node", self.local_cluster, name):
                return doc.fields
        return None

    def cluster_ids(self) -> frozenset[str]:
        """The ids of the Cluster documents read in the last pass: every cluster's, not only the local one's."""
        return frozenset(d.ident[1] for state in self._files.values() for d in state.docs if d.kind == "Cluster")

    def problem_files(self, prefix: str = "") -> frozenset[str]:
        """Names (starting with ``prefix``) of the files that could not be read, or that hold a document left
        out, in the last pass. The Globalnet controller allocates nothing while one of its status files is
        among them (it cannot know which addresses that status holds)."""
        return frozenset(name for name in self._problem_files if name.startswith(prefix))

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(snapshot)`` after the first scan and on every change of the snapshot or of
        ``problem_files()``; returns an unsubscribe function."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    # ----- scanning ------------------------------------------------------------------------------

    def _listing(self) -> dict[str, Stamp] | None:
        out: dict[str, Stamp] = {}
        try:
            with os.scandir(self.directory) as it:
                for entry in it:
                    if not is_document_name(entry.name, SUFFIXES):
                        continue
                    try:
                        if not entry.is_file():
                            continue
                        st = entry.stat()
                    except FileNotFoundError:  # removed while we listed
                        continue
                    out[entry.name] = (st.st_ino, st.st_mtime_ns, st.st_size)
        except (FileNotFoundError, NotADirectoryError):
            return None
        return out

    def scan(self) -> bool:
        """Look at the directory once, here; True when the snapshot or ``problem_files()`` changed (or this was
        the first scan).

        The listeners are called before it returns. ``run()`` and ``watch()`` do the same pass in the
        broker's worker thread instead.
        """
        changed = self._refresh()
        if changed:
            self._notify()
        return changed

    def _refresh(self) -> bool:
        """One pass without notifying: list, read and parse what changed, assemble if needed."""
        with self._lock:
            listing = self._listing()
            if listing is None:
                if not self._dir_missing_logged:
                    log.warning("filebroker.no_directory", directory=str(self.directory))
                    self._dir_missing_logged = True
                return False
            self._dir_missing_logged = False
            content_changed = self._reread(listing)
            found = self._stale_endpoint_files()
            self._log_expiry(found)
            expired_before, self._expiry = self._expiry.expired, found
            if self._view.synced and not content_changed and found.expired == expired_before:
                return False
            return self._assemble()

    def _reread(self, listing: dict[str, Stamp]) -> bool:
        """Re-read the files whose stamp changed; True when a file came, went, or changed its content."""
        signature = tuple(sorted(listing.items()))
        if signature == self._signature:
            return False
        self._signature = signature
        changed = listing.keys() != self._files.keys()
        files: dict[str, _FileState] = {}
        reparsed: list[str] = []
        for name, stamp in listing.items():
            previous = self._files.get(name)
            if previous is not None and previous.stamp == stamp:
                files[name] = previous
                continue
            files[name], content_changed = _read(self.directory / name, name, stamp, previous)
            if content_changed:
                reparsed.append(name)
            changed = changed or content_changed
        for name in self._files.keys() - files.keys():
            self._endpoint_files.pop(name, None)
        self._files = files
        for name in reparsed:  # the Endpoint files' index follows the files whose content changed only
            clusters = endpoint_clusters(self._docs_of(name))
            if clusters:
                self._endpoint_files[name] = clusters
            else:
                self._endpoint_files.pop(name, None)
        return changed

    def _stale_endpoint_files(self) -> Expiry:
        """The Endpoint files not modified for longer than ``endpoint_ttl``: expired, or kept (fail static)."""
        self._next_stale = None
        if self.endpoint_ttl is None or not self._endpoint_files:
            return Expiry()
        oldest = (self._wall_clock() - self.endpoint_ttl) * 1e9
        files = {name: (self._files[name].stamp[1], clusters) for name, clusters in self._endpoint_files.items()}
        fresh = [mtime for mtime, _ in files.values() if mtime >= oldest]
        if fresh:  # a wait ends when the oldest fresh file goes stale (time passing is not an inotify event): 1 ms
            self._next_stale = min(fresh) / 1e9 + self.endpoint_ttl + 0.001  # after the (exclusive) bound
        return expiry(files, oldest)

    def _docs_of(self, name: str) -> tuple[Document, ...]:
        state = self._files[name]
        return state.docs if state.error is None else tuple(d for d in self._last_good.values() if d.file == name)

    def _log_expiry(self, found: Expiry) -> None:
        before = self._expiry
        for name in sorted(found.expired - before.expired):
            log.warning("filebroker.endpoint_expired", file=name, ttl=self.endpoint_ttl)
        for name in sorted(found.kept - before.kept):
            log.warning("filebroker.endpoint_stale_kept", file=name, ttl=self.endpoint_ttl,
                        reason="no other Endpoint of its cluster is fresh: kept (fail static)")  # fmt: skip
        for name in sorted((before.expired | before.kept) - (found.expired | found.kept)):
            if name in self._files:
                log.info("filebroker.endpoint_renewed", file=name)

    def _assemble(self) -> bool:
        docs: list[Document] = []
        problems: list[Problem] = []
        for name in sorted(self._files):
            state = self._files[name]
            if name in self._expiry.expired:
                docs.extend(d for d in self._docs_of(name) if d.kind != "Endpoint")
                continue
            if state.error is None:
                docs.extend(state.docs)
                continue
            kept = [d for d in self._last_good.values() if d.file == name]
            docs.extend(kept)
            problems.append(Problem(file=name, error=state.error, kept_last_good=bool(kept)))
        try:
            assembly = assemble(self.local_cluster, docs, self._last_good, parse=self._parse)
        except SnapshotError as exc:  # the walk accepted only valid steps; this would be a bug: keep what we had
            log.error("filebroker.assemble_failed", directory=str(self.directory), error=str(exc))
            return False
        self._report([*problems, *assembly.problems], assembly)
        problem_files = frozenset(p.file for p in (*problems, *assembly.problems))
        # a file that turns unreadable (or is fixed or removed) may leave the snapshot as it was, but not what
        # a consumer of problem_files() decides (the Globalnet controller allocates nothing while one is there)
        problems_changed, self._problem_files = problem_files != self._problem_files, problem_files
        first = not self._view.synced
        changed = assembly.snapshot != self._view.snapshot
        if assembly.snapshot is not None:
            self._last_good = {d.ident: d for d in assembly.accepted}
        self._view = _View(snapshot=assembly.snapshot, accepted=assembly.accepted, synced=True)
        if first or changed:
            log.info(
                "filebroker.snapshot_changed" if not first else "filebroker.initial_sync",
                directory=str(self.directory),
                cluster=self.local_cluster,
                ready=assembly.snapshot is not None,
                documents=len(assembly.accepted),
                problems=len(problems) + len(assembly.problems),
            )
        return first or changed or problems_changed

    def _report(self, problems: list[Problem], assembly: Assembly) -> None:
        current = {(p.file, p.error) for p in problems}
        for p in problems:
            if (p.file, p.error) not in self._logged:
                log.warning("filebroker.bad_document", file=p.file, error=p.error, kept_last_good=p.kept_last_good)
        self._logged = current
        if assembly.missing is not None and assembly.missing != self._missing_logged:
            log.info("filebroker.incomplete", cluster=self.local_cluster, missing=assembly.missing)
        self._missing_logged = assembly.missing

    def _notify(self) -> None:
        for listener in list(self._listeners):
            try:
                listener(self._view.snapshot)
            except Exception as exc:  # a listener's bug must not stop the broker
                log.exception("filebroker.listener_failed", error=repr(exc))

    # ----- following the directory ------------------------------------------------------------------

    async def _scan_off_loop(self) -> bool:
        """``scan()``'s pass in the broker's worker thread; the listeners are called here, on the loop."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="magw-filebroker")
        changed = await asyncio.get_running_loop().run_in_executor(self._executor, self._refresh)
        if changed:
            self._notify()
        return changed

    def _end_worker(self) -> None:
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False)  # a pass in progress ends on its own; nothing waits for it

    def _start_wakeup(self) -> Wakeup:
        wakeup = Wakeup(self.directory, SUFFIXES, poll_interval=self.poll_interval,
                        rescan_interval=self.rescan_interval, use_inotify=self.use_inotify)  # fmt: skip
        self._wakeup = wakeup
        return wakeup

    async def _next_pass(self, wakeup: Wakeup) -> None:
        """Wait for the next reason to look (``magw.sources.file.wakeup``), and watch the directory from now on."""
        wakeup.touch_wakes = self._expiry.expired | self._expiry.kept  # a touch renews these: look at once
        await wakeup.wait(seconds_until(self._next_stale, self._wall_clock()))
        wakeup.arm()

    def _end(self) -> None:
        wakeup, self._wakeup = self._wakeup, None
        if wakeup is not None:
            wakeup.close()
        self._end_worker()

    async def run(self) -> None:
        """Follow the directory until ``stop()``, calling the listeners on every change."""
        self._stopping = False
        wakeup = self._start_wakeup()
        try:
            wakeup.arm()
            while not self._stopping:
                await self._scan_off_loop()
                if self._stopping:
                    break
                await self._next_pass(wakeup)
        finally:
            self._end()

    def stop(self) -> None:
        self._stopping = True
        if self._wakeup is not None:
            self._wakeup.poke()

    async def watch(self) -> AsyncIterator[Snapshot | None]:
        """Follow the directory by itself: yield the snapshot after the first pass, then after every change.

        Use either ``watch()`` or ``run()`` with listeners, not both on one broker.
        """
        wakeup = self._start_wakeup()
        try:
            wakeup.arm()
            await self._scan_off_loop()
            yield self._view.snapshot
            while True:
                await self._next_pass(wakeup)
                if await self._scan_off_loop():
                    yield self._view.snapshot
        finally:
            self._end()
