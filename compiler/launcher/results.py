"""A sweep trial's result: the small JSON file its training writes, read with care.

The training is the user's code; what it writes is checked (a JSON object of finite numbers, of
bounded size, not through a link) before the launcher records it beside its success.
"""

from __future__ import annotations

import contextlib
import json
import math
import os

from .messages import describe, say
from .records import STATE_DIRECTORY

RESULT_VARIABLE = "TFCOMPILE_RESULT_FILE"
RESULT_FILE = STATE_DIRECTORY + "/result.json"
"""Where a sweep's trial may write its result (its `RESULT_VARIABLE`): this pod's emptyDir."""
RESULT_MAXIMUM_BYTES = 4096
"""The most a result may hold, as written and as recorded (compact JSON)."""


def read_result(path: str) -> str | None:
    """The result the training wrote at `path` (a sweep's trial): a JSON object of numbers, as
    compact JSON; None when there is none or it is not one (said)."""
    if not path:
        return None
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as error:
        say("cannot read the result " + path + " (" + describe(error) + "); not recorded")
        return None
    try:
        with os.fdopen(descriptor, "rb") as handle:
            text = handle.read(RESULT_MAXIMUM_BYTES + 1)
        if len(text) > RESULT_MAXIMUM_BYTES:
            raise ValueError("more than " + str(RESULT_MAXIMUM_BYTES) + " bytes")
        result = json.loads(text.decode("utf-8"))
        if not isinstance(result, dict) or not result or not all(
                isinstance(value, (int, float)) and not isinstance(value, bool)
                and math.isfinite(value) for value in result.values()):
            raise ValueError("not a JSON object of finite numbers, such as "
                             + json.dumps({"accuracy": 0.9}))
    except (OSError, ValueError) as error:
        say("the result in " + path + " is not recorded: " + describe(error))
        return None
    compact = json.dumps(result, sort_keys=True, separators=(",", ":"))
    if len(compact) > RESULT_MAXIMUM_BYTES:
        say("the result in " + path + " is not recorded: more than "
            + str(RESULT_MAXIMUM_BYTES) + " bytes as compact JSON")
        return None
    return compact


def remove_result(path: str) -> None:
    """A result left by an earlier attempt in this pod is not this training's."""
    if path:
        with contextlib.suppress(OSError):
            os.remove(path)
