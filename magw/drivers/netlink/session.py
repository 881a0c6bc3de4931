"""A pyroute2 session bound to one network namespace, plus netlink error wording.

``IPRoute(netns=NAME)`` CREATES a missing namespace unless ``flags=0`` (pyroute2
0.9.7): we always pass ``flags=0`` and check the name first (``magw.drivers.netns``),
so a typo never leaves a stray namespace behind and never falls back to the host's
namespace.
"""

from __future__ import annotations

import errno
import os
from typing import Any

from pyroute2.iproute import IPRoute  # not the package: magw.cli.pyroute2_light

from magw.drivers.netns import NoSuchNetns, check_netns

# <linux/netlink.h>: SOL_NETLINK / NETLINK_EXT_ACK. pyroute2 0.9.7 does not enable extended acks, so
# errors read "Operation not supported" instead of the kernel's "Cannot change VNI".
_SOL_NETLINK = 270
_NETLINK_EXT_ACK = 11


class OpError(Exception):
    """An operation we refuse or cannot carry out, worded like a kernel error: ``ENODEV: no device vx-x``."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"{errno_name(code)}: {message}")
        self.code = code


def open_iproute(netns: str | None) -> Any:
    """An IPRoute socket in ``netns`` (None: the current namespace), with extended acks on."""
    check_netns(netns)
    try:
        ipr = IPRoute(netns=netns, flags=0) if netns is not None else IPRoute()
    except FileNotFoundError as exc:  # removed between the check and the open
        raise NoSuchNetns(netns or "") from exc
    ipr.setsockopt(_SOL_NETLINK, _NETLINK_EXT_ACK, 1)
    return ipr


def errno_name(code: int) -> str:
    return errno.errorcode.get(abs(code), f"E{abs(code)}")


def describe_error(exc: BaseException) -> str:
    """``ERRNAME: kernel message`` for a netlink or OS error (the message is the extack text when there is one)."""
    if isinstance(exc, OpError):
        return str(exc)
    code = error_code(exc)
    if code:
        message = exc.args[1] if len(exc.args) > 1 and exc.args[1] else os.strerror(code)
        return f"{errno_name(code)}: {message}"
    return f"{type(exc).__name__}: {exc}"


def error_code(exc: BaseException) -> int:
    """The errno of a netlink/OS error, 0 when it has none."""
    code = getattr(exc, "code", None)
    if isinstance(code, int):
        return abs(code)
    if isinstance(exc, OSError) and exc.errno is not None:
        return exc.errno
    return 0
