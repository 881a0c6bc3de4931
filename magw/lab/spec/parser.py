"""The generic field readers of the lab's topology parser: each check raises ``LabInputError`` with the source
and the field path (``<source>: <field path>: <reason>``, one line).

Below every part of the topology (``magw.lab.spec.topology``, ``magw.lab.spec.globalnet``,
``magw.lab.spec.egressgw``): it knows no cluster, service or VIP, only YAML values.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Set
from ipaddress import IPv4Network
from typing import Any

from magw.lab.errors import LabInputError
from magw.model import Strategy
from magw.model.cable import Cable

RATE_RE = re.compile(r"^[1-9][0-9]*(kbit|mbit|gbit)$")


class Parser:
    """Field checks that raise ``LabInputError`` with the source and the field path."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, path: str, reason: str) -> LabInputError:
        where = f"{path}: " if path else ""
        return LabInputError(f"{self.source}: {where}{reason}")

    def mapping(self, value: object, path: str, allowed: Set[str]) -> Mapping[str, Any]:
        """``value`` as a mapping of ``allowed`` keys; the error for an unknown key lists every one of them."""
        if not isinstance(value, Mapping):
            raise self.fail(path, f"must be a mapping, got {type(value).__name__}")
        for key in value:
            if key not in allowed:
                prefix = f"{path}." if path else ""
                listed = ", ".join(sorted(allowed))
                raise self.fail(f"{prefix}{key}", f"unknown key (expected one of: {listed})")
        return value

    def sequence(self, value: object, path: str, *, min_len: int, max_len: int) -> list[Any]:
        if value is None and min_len > 0:
            raise self.fail(path, "is required")
        if not isinstance(value, list):
            raise self.fail(path, f"must be a list, got {type(value).__name__}")
        if not min_len <= len(value) <= max_len:
            raise self.fail(path, f"must have {min_len} to {max_len} items, got {len(value)}")
        return value

    def integer(self, value: object, path: str, low: int, high: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(path, f"must be an integer, got {value!r}")
        if not low <= value <= high:
            raise self.fail(path, f"must be from {low} to {high}, got {value}")
        return value

    def boolean(self, value: object, path: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(path, f"must be true or false, got {value!r}")
        return value

    def string(self, value: object, path: str, pattern: re.Pattern[str], what: str) -> str:
        if not isinstance(value, str) or not pattern.match(value):
            raise self.fail(path, f"{value!r} is not {what}")
        return value

    def strategy(self, value: object, path: str) -> Strategy:
        names = [s.value for s in Strategy]
        if value not in names:
            raise self.fail(path, f"{value!r} is not one of {', '.join(names)}")
        return Strategy(value)

    def cable(self, value: object, path: str) -> Cable:
        names = [c.value for c in Cable]
        if value not in names:
            raise self.fail(path, f"{value!r} is not one of {', '.join(names)}")
        return Cable(value)

    def rate(self, value: object, path: str) -> str | None:
        if value is None:
            return None
        return self.string(value, path, RATE_RE, "a rate like 50mbit (kbit, mbit or gbit)")

    def cidr(self, value: object, path: str) -> IPv4Network:
        if not isinstance(value, str):
            raise self.fail(path, f"{value!r} is not an IPv4 CIDR")
        try:
            loose = IPv4Network(value, strict=False)
        except ValueError:
            raise self.fail(path, f"{value!r} is not an IPv4 CIDR") from None
        try:
            return IPv4Network(value)
        except ValueError:
            raise self.fail(path, f"{value!r} has host bits set (did you mean {loose}?)") from None
