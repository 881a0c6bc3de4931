"""The OVN Northbound driver over ovsdbapp (docs/ovn-driver.md) and its in-memory fake (``fake``).

``connect``/``OvnNbDriver``/``OvnConnectError`` are loaded on first use: importing this package (for the fake,
or ``OvnInputError``) must not import ovsdbapp.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from magw.drivers.ovn.nbrows import OvnInputError

if TYPE_CHECKING:
    from magw.drivers.ovn.nbdriver import OvnConnectError, OvnNbDriver, connect

__all__ = ["OvnConnectError", "OvnInputError", "OvnNbDriver", "connect"]


def __getattr__(name: str) -> Any:
    if name in ("OvnConnectError", "OvnNbDriver", "connect"):
        from magw.drivers.ovn import nbdriver

        return getattr(nbdriver, name)
    raise AttributeError(name)
