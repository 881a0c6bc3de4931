"""The WireGuard cable's flags and key access, shared by ``magw-route-agent`` and ``magw-gateway`` of a node.

Both daemons of a gateway node read the one key pair in ``--state-dir``: the gateway publishes its public
key in the Endpoint, the route agent gives the private key (by path) to the device. Whichever starts first
makes it (magw.drivers.wireguard.keys); neither logs more than the public key.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from magw.drivers.wireguard import keys

DEFAULT_STATE_DIR = "/var/lib/magw"


def add_state_dir_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--state-dir",
        default=DEFAULT_STATE_DIR,
        metavar="DIR",
        help=f"cable wireguard: where this node's key pair lives, wireguard/private.key, mode 0600 (default "
        f"{DEFAULT_STATE_DIR}; made on first use, the directory must exist); the route agent also keeps "
        "wireguard-go's pid file and log there",
    )


class CableKeys:
    """This node's WireGuard public key, derived again only when the key file changed (a rotation)."""

    def __init__(self, state_dir: str | Path) -> None:
        self.state_dir = Path(state_dir)
        self._cached: tuple[keys.KeyFile, str] | None = None

    def public_key(self) -> str:
        """The public key, the key pair made first if there is none; raises keys.KeyFileError (one line)."""
        current, _made = keys.ensure_private_key(self.state_dir)
        if self._cached is None or self._cached[0] != current:
            self._cached = (current, keys.public_key(current))
        return self._cached[1]

    def identity(self) -> tuple[int, int, int] | None:
        """The key file's identity now (a stat, cheap), None without a usable file."""
        try:
            current = keys.current_key(self.state_dir)
        except keys.KeyFileError:
            return None
        return None if current is None else current.identity

    def changed(self) -> bool:
        """True when the key file is not the one the cached public key came from."""
        return self._cached is not None and self.identity() != self._cached[0].identity
