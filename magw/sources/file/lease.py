"""A lease in the file broker: one holder at a time (the Globalnet controller runs as a single replica).

The lease is a ``Lease`` document, ``lease-<name>.yaml``::

    kind: Lease
    name: globalnet-east
    holder: host-a-4242
    acquireTime: 1763874000.12
    renewTime: 1763874009.53
    leaseDurationSeconds: 6.0
    leaseTransitions: 3

``try_acquire()`` takes it when it is free, expired (``renewTime + leaseDurationSeconds`` in the past) or
already ours (a renewal), and otherwise answers False. The read-modify-write runs under ``flock`` on a
sidecar file ``.lease-<name>.lock`` (the broker ignores names starting with ``.``), so two processes of this
host never both take it; the document is replaced atomically. The file broker is a directory of one host, so
that is the scope a lock must cover; a Kubernetes deployment uses a coordination Lease instead (docs/kubernetes.md).

A holder that stops renewing loses the lease once it expires; ``release()`` gives it up at once. The clock
is the wall clock (``time.time``): holders on one host share it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs
import yaml

from magw.sources.file.atomic import write_atomic


@attrs.frozen
class LeaseRecord:
    holder: str
    acquired: float
    renewed: float
    duration: float
    transitions: int

    def expired(self, now: float) -> bool:
        return not self.holder or now >= self.renewed + self.duration


def _check(name: str, what: str) -> str:
    if not name or "/" in name or name.startswith("."):
        raise ValueError(f"{what}: {name!r} is not usable in a file name")
    return name


class FileLease:
    def __init__(
        self,
        directory: str | os.PathLike[str],
        name: str,
        holder: str,
        duration: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not duration > 0:
            raise ValueError(f"lease duration: must be > 0 seconds, got {duration}")
        self.directory = Path(directory)
        self.name = _check(name, "lease name")
        self.holder = _check(holder, "holder")
        self.duration = duration
        self._clock = clock
        self.path = self.directory / f"lease-{name}.yaml"
        self._lock_path = self.directory / f".lease-{name}.lock"

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def read(self) -> LeaseRecord | None:
        """The lease as the file holds it; None when there is none or it cannot be read as a lease."""
        try:
            raw = yaml.safe_load(self.path.read_text(encoding="utf-8"))
            return LeaseRecord(
                holder=str(raw.get("holder") or ""),
                acquired=float(raw["acquireTime"]),
                renewed=float(raw["renewTime"]),
                duration=float(raw["leaseDurationSeconds"]),
                transitions=int(raw.get("leaseTransitions", 0)),
            )
        except (OSError, yaml.YAMLError, AttributeError, KeyError, TypeError, ValueError):
            return None

    def _write(self, record: LeaseRecord) -> None:
        doc = {
            "kind": "Lease",
            "name": self.name,
            "holder": record.holder,
            "acquireTime": record.acquired,
            "renewTime": record.renewed,
            "leaseDurationSeconds": record.duration,
            "leaseTransitions": record.transitions,
        }
        write_atomic(self.path, yaml.safe_dump(doc, sort_keys=False))

    def try_acquire(self) -> bool:
        """Take or renew the lease; False while another holder's lease has not expired."""
        with self._locked():
            now = self._clock()
            current = self.read()
            if current is not None and current.holder == self.holder and not current.expired(now):
                self._write(attrs.evolve(current, renewed=now, duration=self.duration))
                return True
            if current is not None and not current.expired(now):
                return False
            transitions = current.transitions + 1 if current is not None else 0
            self._write(LeaseRecord(self.holder, now, now, self.duration, transitions))
            return True

    def release(self) -> None:
        """Give the lease up at once, if it is ours."""
        with self._locked():
            current = self.read()
            if current is not None and current.holder == self.holder:
                self._write(attrs.evolve(current, holder="", renewed=self._clock()))
