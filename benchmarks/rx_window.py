"""The aggregate of several iperf3 clients over the span in which all of them were sending.

iperf3 clients started together do not send together: the first fills the shaped link's queue
and the others' connection set-up waits behind it (0.5-1 s). Each iperf3 divides its bytes by
its own window, so the sum of their rates exceeds what the link carried. This module samples the
receivers' interface counters instead and keeps the span in which every one of them grew.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Sequence
from typing import TextIO

import attrs

from magw.lab.spec.layout import PodLayout
from magw.lab.spec.naming import POD_IF

SAMPLE_EVERY = 0.1  # seconds between reads of the receivers' counters
ACTIVE_BPS = 1e6  # a pod whose counter grew faster than this (bit/s) between two samples is receiving


Sample = tuple[float, tuple[int, ...]]  # (monotonic time, receive bytes of every server pod)


@attrs.frozen
class Window:
    start: float
    end: float
    bytes: int  # frame bytes all server pods received between start and end


def common_window(samples: Sequence[Sample], active_bps: float = ACTIVE_BPS) -> Window | None:
    """The span in which every pod was receiving, from counter samples; None when there is none.

    A pod is receiving from the first sample that shows its counter grew faster than
    ``active_bps`` to the sample before the last one that does (it may have stopped any
    time after that one). The window is the intersection of the pods' spans.
    """
    if len(samples) < 2:
        return None
    pods = len(samples[0][1])
    first: list[int] = []
    last: list[int] = []
    for pod in range(pods):
        grew = [
            i
            for i in range(1, len(samples))
            if (samples[i][1][pod] - samples[i - 1][1][pod]) * 8 > active_bps * (samples[i][0] - samples[i - 1][0])
        ]
        if not grew:
            return None
        first.append(grew[0])
        last.append(grew[-1] - 1)
    lo, hi = max(first), min(last)
    if hi <= lo:
        return None
    received = sum(samples[hi][1][p] - samples[lo][1][p] for p in range(pods))
    return Window(start=samples[lo][0], end=samples[hi][0], bytes=received)


def _netns_inode(namespace: str) -> int:
    return os.stat(f"/run/netns/{namespace}").st_ino


def _rx_bytes(dev: TextIO) -> int:
    """Receive bytes of the pod interface in an open ``/proc/<pid>/net/dev`` (read again from the start)."""
    dev.seek(0)
    for line in dev.read().splitlines():
        name, _, counters = line.partition(":")
        if name.strip() == POD_IF:
            return int(counters.split()[0])
    raise RuntimeError(f"no {POD_IF} in {dev.name}")


class Sampler:
    """Reads the server pods' receive counters every SAMPLE_EVERY seconds in a thread, while the clients run."""

    def __init__(self, servers: Sequence[subprocess.Popen[bytes]], pods: Sequence[PodLayout]) -> None:
        deadline = time.monotonic() + 10
        for proc, pod in zip(servers, pods, strict=True):  # ip netns exec has entered the namespace (same pid)
            while os.stat(f"/proc/{proc.pid}/ns/net").st_ino != _netns_inode(pod.namespace):
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError(f"iperf3 server in {pod.namespace} did not start")
                time.sleep(0.05)
        # Opened once: the open file keeps the namespace, so it still reads after a one-shot server exits.
        self._devs = [open(f"/proc/{p.pid}/net/dev") for p in servers]  # noqa: SIM115 (closed in __exit__)
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _read(self) -> None:
        counters = tuple(_rx_bytes(dev) for dev in self._devs)
        self.samples.append((time.monotonic(), counters))

    def _loop(self) -> None:
        while not self._stop.wait(SAMPLE_EVERY):
            self._read()

    def __enter__(self) -> Sampler:
        self._read()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        try:
            self._read()
        finally:
            for dev in self._devs:
                dev.close()
