"""A sweep trial's result: the small JSON file its training writes, read with care.

The training is the user's code; what it writes is checked before the launcher records it
beside its success, and whatever it wrote ends in one of two records, never in an exception
(the training has succeeded by then, and a launcher that failed here would train it again):
the result as compact JSON, or a note that it was refused and why (`refused: <reason>`, one of
`REFUSALS` in `protocol.py`, so that the cluster's launcher policy can hold the note to a few
fixed words and `tfcompile status` can show it). The log line says more.

A result is a JSON object of numbers that a double holds (finite: no NaN, no infinity, no
integer beyond one), at most `RESULT_MAXIMUM_BYTES` in UTF-8, as the training wrote it and as
recorded. The traps of reading JSON from someone else are closed here: a file is read only up
to its limit, through no link and only if it is a regular file; an integer literal is never
converted when it has more digits than a double can hold (Python's conversion of a long digit
string is slow, and refused past `sys.get_int_max_str_digits()`), and nesting too deep for the
parser's recursion is a refusal like any other. `tfcompile status` reads the recorded result
with this same function, so both sides agree on what a result is.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import stat
from typing import Dict, Union

from .messages import describe, say
from .protocol import (
    NOT_A_FILE,
    NOT_JSON,
    NOT_NUMBERS,
    NOT_TEXT,
    REFUSED,
    RESULT_MAXIMUM_BYTES,
    TOO_LARGE,
)

RESULT_VARIABLE = "TFCOMPILE_RESULT_FILE"
INTEGER_MAXIMUM_DIGITS = 309
"""The most digits an integer literal of a result may have: the largest double is below
10**309, so a longer integer is no number a result may hold, and is refused unconverted."""
Result = Dict[str, Union[int, float]]


class ResultRefused(ValueError):
    """What the training wrote is not a result: `reason` is one of `REFUSALS`, `detail` says
    more (for the log, never for the record)."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(reason + (" (" + detail + ")" if detail else ""))
        self.reason = reason


class NotADouble(ValueError):
    """A number literal that no double holds (NaN, infinity, an integer of too many digits)."""


def integer(text: str) -> int:
    """An integer literal of a result, converted only when a double could hold it."""
    if len(text.lstrip("-")) > INTEGER_MAXIMUM_DIGITS:
        raise NotADouble("an integer of more than " + str(INTEGER_MAXIMUM_DIGITS) + " digits")
    return int(text)


def constant(text: str) -> float:
    """NaN, Infinity and -Infinity, which Python's JSON reader accepts and JSON does not."""
    raise NotADouble(text + " is not a finite number")


def finite(value: object) -> bool:
    """Whether `value` is a number (not a boolean) that a double holds, and not NaN or infinite."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer beyond the largest double
        return False


def parse_result(data: bytes) -> Result:
    """The result in `data`, or `ResultRefused`; nothing else is raised."""
    if len(data) > RESULT_MAXIMUM_BYTES:
        raise ResultRefused(TOO_LARGE)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ResultRefused(NOT_TEXT, str(error)) from None
    try:
        found = json.loads(text, parse_int=integer, parse_constant=constant)
    except NotADouble as error:
        raise ResultRefused(NOT_NUMBERS, str(error)) from None
    except RecursionError:
        raise ResultRefused(NOT_NUMBERS, "nested too deeply") from None
    except ValueError as error:
        raise ResultRefused(NOT_JSON, str(error)) from None
    if not isinstance(found, dict) or not found or not all(
            finite(value) for value in found.values()):
        raise ResultRefused(NOT_NUMBERS, "such as " + json.dumps({"accuracy": 0.9}))
    return found


def compact(result: Result) -> str:
    """A result as recorded: compact JSON, keys sorted, ASCII; `ResultRefused` if too large."""
    text = json.dumps(result, sort_keys=True, separators=(",", ":"))
    if len(text.encode("utf-8")) > RESULT_MAXIMUM_BYTES:
        raise ResultRefused(TOO_LARGE, "as compact JSON, other characters than ASCII escaped")
    return text


def read_file(path: str) -> bytes:
    """At most one byte more than a result may hold, from a regular file reached through no
    link; FileNotFoundError when there is none, `ResultRefused` for anything else."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        raise
    except OSError as error:
        raise ResultRefused(NOT_A_FILE, describe(error)) from None
    try:
        with os.fdopen(descriptor, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise ResultRefused(NOT_A_FILE, "a directory, device, FIFO or socket")
            return handle.read(RESULT_MAXIMUM_BYTES + 1)
    except OSError as error:
        raise ResultRefused(NOT_A_FILE, describe(error)) from None


def read_result(path: str) -> str | None:
    """What to record of the result the training wrote at `path` (a sweep's trial): the result
    as compact JSON, or `refused: <reason>` (said, with more, in the log); None when there is
    no file (or no path)."""
    if not path:
        return None
    try:
        return compact(parse_result(read_file(path)))
    except FileNotFoundError:
        return None
    except ResultRefused as refusal:
        say("the result in " + path + " is not recorded: " + str(refusal))
        return REFUSED + ": " + refusal.reason


def remove_result(path: str) -> None:
    """A result left by an earlier attempt in this pod is not this training's."""
    if path:
        with contextlib.suppress(OSError):
            os.remove(path)
