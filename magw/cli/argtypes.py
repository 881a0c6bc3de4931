"""argparse types for numbers in a range: a value out of range is refused with one line naming the range."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def int_in(low: int, high: int) -> Callable[[str], int]:
    def check(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is not in {low}..{high}")
        return value

    return check


def float_in(low: float, high: float) -> Callable[[str], float]:
    def check(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value:g} is not in {low:g}..{high:g}")
        return value

    return check
