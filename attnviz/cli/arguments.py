"""Argument types the commands share: argparse calls them on the text given and reports their error in one line."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def int_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type: an integer of at least `minimum` ("a positive integer" for 1)."""
    wanted = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {wanted}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected {wanted}, got {value}")
        return value

    return parse
