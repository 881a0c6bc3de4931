"""Whether a server answers on a unix stream socket (the drivers' daemons and the lab's servers)."""

from __future__ import annotations

import socket
from pathlib import Path


def listens(path: Path) -> bool:
    """Whether a server accepts connections on the unix stream socket ``path``. The socket file appears at the
    server's bind(), before its listen(): a client that connects in between is refused ("Connection refused";
    ``ovs-vsctl`` and ``wg`` exit on it), so a file that exists is not yet a server that answers. The connection is
    closed at once, without a byte sent."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        try:
            sock.connect(str(path))
        except OSError:
            return False
    return True
