"""Bounded waits for tests: poll a condition until it holds or a deadline passes (never a bare sleep)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(predicate: Callable[[], T], what: str, timeout: float = 60.0, every: float = 0.02) -> T:
    """The first truthy value of `predicate()`; AssertionError naming `what` after `timeout` seconds.

    The timeout only bounds a hang: the test waits on the condition, never on the clock."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(every)
