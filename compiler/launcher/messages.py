"""What the launcher says in the pod's log, and how it words an error.

Every line starts with `tfcompile: `, so a reader of `kubectl logs` tells the launcher's lines
from the training's.
"""

from __future__ import annotations

import sys
import urllib.error

LOG_PREFIX = "tfcompile: "


def say(message: str) -> None:
    print(LOG_PREFIX + message, file=sys.stderr, flush=True)


def describe(error: Exception) -> str:
    if isinstance(error, urllib.error.HTTPError):
        return "HTTP " + str(error.code) + " " + str(error.reason)
    return type(error).__name__ + ": " + str(error)
