"""Network namespaces: find one by name, enter it, and tell whether we are in the host's initial one.

The one place for namespace handling; the netlink and nft drivers, the sysctl
helpers and the CLI all go through it.

Names. ``NAME`` means ``/var/run/netns/NAME`` as ``ip netns add`` makes it. We
never create a namespace. A name with ``/``, an empty name, ``.``/``..``, a
missing entry, and an entry that is not a network namespace (a plain file, a
directory, another kind of namespace) all raise ``NoSuchNetns``: the file is
opened and asked its type (``NS_GET_NSTYPE``, Linux >= 4.11), so a plain file
under ``/run/netns`` is refused up front instead of failing later in
``setns(2)``.

Entering. ``setns(2)`` with ``CLONE_NEWNET`` moves only the calling thread.
``in_netns`` moves the current thread for the length of a block and always
brings it back; ``run_in_netns`` runs a function in a short-lived thread of its
own, so the caller's thread never moves. Python 3.11 has no ``os.setns``
(3.12 has), hence the libc call.

The guard. ``initial_netns`` answers yes, no, or cannot tell (``InitialNetns``)
and ``current_netns_refusal`` turns every answer but "no" into one line that
says why and how to override (``--allow-init-netns``): a guard that cannot
decide refuses.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import re
import threading
from collections.abc import Callable, Iterator
from typing import TypeVar

import attrs

T = TypeVar("T")

NETNS_DIR = "/var/run/netns"
CLONE_NEWNET = 0x40000000
NS_GET_NSTYPE = 0xB703  # <linux/nsfs.h> _IO(0xb7, 0x3), Linux >= 4.11

OWN_NETNS = "/proc/thread-self/ns/net"  # this thread's: setns moves threads, not processes
INIT_NETNS = "/proc/1/ns/net"
# <linux/nsfs.h> NET_NS_INIT_INO: since Linux 6.18 the initial network namespace has this fixed inode
# number. Older kernels number every namespace from 0xF0000000 up, so no other namespace has it.
NET_NS_INIT_INO = 0xEFFFFFF9
FIXED_INIT_INO_SINCE = (6, 18)
ALLOW_FLAG = "--allow-init-netns"

_libc = ctypes.CDLL(None, use_errno=True)
_libc.setns.argtypes = [ctypes.c_int, ctypes.c_int]
_libc.setns.restype = ctypes.c_int


class NoSuchNetns(LookupError):
    """No network namespace of that name (it is never created); ``str()`` is one line naming it."""

    def __init__(self, name: str, detail: str = "") -> None:
        super().__init__(f"{'not a network namespace' if detail else 'no such network namespace'}: {name}{detail}")
        self.name = name


# -- names -----------------------------------------------------------------------------------------


def _checked_path(name: str) -> str:
    if not name or "/" in name or name in (".", ".."):
        raise NoSuchNetns(name, " (a name under /var/run/netns has no '/' and is not '', '.' or '..')")
    return os.path.join(NETNS_DIR, name)


def open_netns(name: str) -> int:
    """An O_RDONLY descriptor of namespace ``name``, checked to be a network namespace; the caller closes it."""
    path = _checked_path(name)
    try:  # O_NONBLOCK: a FIFO there must not hang us (a namespace file ignores the flag)
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY)
    except FileNotFoundError:
        raise NoSuchNetns(name) from None
    try:
        kind = fcntl.ioctl(fd, NS_GET_NSTYPE)
    except OSError as exc:  # ENOTTY: not a namespace file at all (a plain file, a directory)
        os.close(fd)
        raise NoSuchNetns(name, f" ({path}: {os.strerror(exc.errno or errno.ENOTTY)})") from None
    if kind != CLONE_NEWNET:
        os.close(fd)
        raise NoSuchNetns(name, f" ({path} is a namespace of type {kind:#x}, not CLONE_NEWNET)")
    return fd


def netns_path(name: str) -> str:
    """The path of namespace ``name``, after checking that it is a network namespace (else NoSuchNetns)."""
    os.close(open_netns(name))
    return os.path.join(NETNS_DIR, name)


def check_netns(netns: str | None) -> None:
    """Raise NoSuchNetns unless ``netns`` is None (the current namespace) or a network namespace."""
    if netns is not None:
        netns_path(netns)


# -- entering --------------------------------------------------------------------------------------


def setns(fd: int) -> None:
    """Move the calling thread into the network namespace open as ``fd``."""
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


@contextlib.contextmanager
def in_netns(name: str | None) -> Iterator[None]:
    """Run the block with this thread in namespace ``name`` (None: stay); the thread always comes back."""
    if name is None:
        yield
        return
    target = open_netns(name)
    try:
        home = os.open(OWN_NETNS, os.O_RDONLY | os.O_CLOEXEC)
        try:
            setns(target)
            try:
                yield
            finally:
                setns(home)
        finally:
            os.close(home)
    finally:
        os.close(target)


def run_in_netns(netns: str | None, fn: Callable[[], T]) -> T:
    """``fn()`` evaluated inside ``netns`` in a fresh thread (None: right here, in the current namespace)."""
    if netns is None:
        return fn()
    target = open_netns(netns)
    result: list[T] = []
    error: list[BaseException] = []

    def worker() -> None:
        try:
            setns(target)
            result.append(fn())
        except BaseException as exc:  # handed to the caller's thread below
            error.append(exc)

    try:
        thread = threading.Thread(target=worker, name=f"netns-{netns}", daemon=True)
        thread.start()
        thread.join()
    finally:
        os.close(target)
    if error:
        raise error[0]
    return result[0]


# -- the guard -------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class InitialNetns:
    """Is this thread in the initial network namespace? ``initial`` None: cannot tell; ``reason``: how we know."""

    initial: bool | None
    reason: str


def _release(text: str) -> tuple[int, int]:
    """(major, minor) of a ``uname -r`` text like ``6.18.44-fc``; (0, 0) when it has none."""
    found = re.match(r"(\d+)\.(\d+)", text)
    return (int(found[1]), int(found[2])) if found else (0, 0)


def _why(path: str, exc: OSError) -> str:
    return f"{path}: {exc.strerror or exc}"


def initial_netns(
    *,
    own: str | None = None,
    init: str | None = None,
    stat: Callable[[str], os.stat_result] = os.stat,
    release: str | None = None,
) -> InitialNetns:
    """Compare this thread's network namespace with PID 1's by (st_dev, st_ino).

    When PID 1's cannot be read (containers, sandboxes, hidepid), Linux >= 6.18 still
    tells: the initial namespace has the fixed inode ``NET_NS_INIT_INO``. Otherwise the
    answer is "cannot tell". The parameters are for tests: ``own``/``init`` default to
    ``OWN_NETNS``/``INIT_NETNS``, ``release`` to ``uname -r``.
    """
    own = OWN_NETNS if own is None else own
    init = INIT_NETNS if init is None else init
    try:
        mine = stat(own)
    except OSError as exc:
        return InitialNetns(initial=None, reason=_why(own, exc))
    if mine.st_ino == NET_NS_INIT_INO:
        return InitialNetns(initial=True, reason=f"{own} has inode {NET_NS_INIT_INO:#x}, the initial namespace's")
    try:
        pid1 = stat(init)
    except OSError as exc:
        kernel = os.uname().release if release is None else release
        if _release(kernel) >= FIXED_INIT_INO_SINCE:
            reason = f"{_why(init, exc)}; on Linux {kernel} the initial namespace has inode {NET_NS_INIT_INO:#x}"
            return InitialNetns(initial=False, reason=reason)
        return InitialNetns(initial=None, reason=_why(init, exc))
    same = (mine.st_dev, mine.st_ino) == (pid1.st_dev, pid1.st_ino)
    return InitialNetns(initial=same, reason=f"{own} {'is' if same else 'is not'} {init}")


IN_NODE_NETNS = "run inside the node's namespace (ip netns exec NS ...)"


def refusal(verdict: InitialNetns, *, doing: str, instead: str = IN_NODE_NETNS) -> str | None:
    """The one-line refusal to ``doing`` (e.g. "program") the current namespace; None when it is not the initial one.

    ``instead``: what to do rather than overriding with ``--allow-init-netns`` when we know it is the host's.
    When we cannot tell, moving elsewhere would not help: the override is the only way on.
    """
    if verdict.initial is False:
        return None
    if verdict.initial:
        return (
            f"refusing to {doing} the host's initial network namespace ({verdict.reason}); "
            f"{instead}, or pass {ALLOW_FLAG} if the node really is the host"
        )
    return (
        f"refusing to {doing} the current network namespace: cannot tell whether it is the host's initial one "
        f"({verdict.reason}); pass {ALLOW_FLAG} if it is the node's own namespace"
    )


def current_netns_refusal(doing: str, *, allow: bool, instead: str = IN_NODE_NETNS) -> str | None:
    """None when we may ``doing`` the current namespace (``allow``, or known not initial); else why not, on one line."""
    return None if allow else refusal(initial_netns(), doing=doing, instead=instead)
