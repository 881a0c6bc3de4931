"""Read and write ``/proc/sys`` keys inside a network namespace we manage.

``/proc/sys/net/*`` shows the namespace of the thread that opens the file, so
the open happens in a thread that joined the namespace (``netns.run_in_netns``). With
``netns=None`` this is the current namespace: only the CLI on a real node that
we manage passes None; tests always name a throwaway namespace.
"""

from __future__ import annotations

from magw.drivers.netns import run_in_netns


def _path(key: str) -> str:
    if not key or ".." in key or key.startswith(("/", ".")):
        raise ValueError(f"sysctl key {key!r}: not a dotted key like net.ipv4.fib_multipath_hash_policy")
    return "/proc/sys/" + key.replace(".", "/")


def read_sysctl(netns: str | None, key: str) -> str:
    """The value of ``key`` (e.g. ``net.ipv4.fib_multipath_hash_policy``) in ``netns``, stripped."""
    path = _path(key)

    def read() -> str:
        with open(path) as f:
            return f.read().strip()

    return run_in_netns(netns, read)


def write_sysctl(netns: str | None, key: str, value: str) -> None:
    """Set ``key`` to ``value`` in ``netns``."""
    path = _path(key)

    def write() -> None:
        with open(path, "w") as f:
            f.write(value)

    run_in_netns(netns, write)
