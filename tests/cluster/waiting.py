"""Waiting in the cluster tests: one way to poll until a condition holds, so every wait looks
as often, and every timeout says the same things: how long it waited, what for, and what the
caller adds to explain the state it saw."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

POLL_SECONDS = 1.0


def wait_for(what: str, check: Callable[[], T | None], timeout: float,
             describe: Callable[[], str] = lambda: "") -> T:
    """Poll `check` until it returns something true, and return that; after `timeout` seconds,
    fail naming `what` was awaited, followed by what `describe` says."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}\n{describe()}")
        time.sleep(POLL_SECONDS)
