"""The OVN Northbound driver over ovsdbapp (docs/ovn-driver.md) and its in-memory fake (``fake``)."""

from magw.drivers.ovn.nbdriver import OvnConnectError, OvnNbDriver, connect
from magw.drivers.ovn.nbrows import OvnInputError

__all__ = ["OvnConnectError", "OvnInputError", "OvnNbDriver", "connect"]
