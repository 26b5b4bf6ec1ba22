"""A training's progress: the small JSON file it may rewrite as it trains, shown as a line.

`tfcompile status` and Argo CD say Running until the end unless the training tells how far it
is. It may write a JSON object of numbers at `TFCOMPILE_PROGRESS_FILE` (say `{"epoch": 3,
"epochs": 8, "loss": 0.21}`), as often as it likes; the launcher reads it at most every
`PROGRESS_SECONDS` while the training runs (and once when it ends), and records what changed
as one line of text beside the task's record: `<task>.progress` (`epoch 3/8, loss 0.21`) and
`<task>.progress-revision` (the revision it belongs to), which `status` shows per task and the
Argo CD health check puts in its message (it compares by equality only, hence the two keys).

The file is read as a result is (`results.py`: a regular file through no link, a JSON object of
finite numbers), and the line is held to `PROGRESS_MAXIMUM_BYTES` and to letters, digits and a
few marks (`PROGRESS_CHARACTERS`; both in `protocol.py`), which the cluster's launcher policy
holds too. A file that is not such an object is said once in the log and not recorded; progress
never stops a training.
"""

from __future__ import annotations

import contextlib
import math
import os
from typing import Dict, Union

from .messages import say
from .protocol import PROGRESS_MAXIMUM_BYTES
from .results import ResultRefused, parse_result, read_file

PROGRESS_VARIABLE = "TFCOMPILE_PROGRESS_FILE"
"""Set by the launcher in the training's environment (not the pod's: a new launcher restarts
no pod): where the training may write its progress."""
PROGRESS_FILE_NAME = "progress.json"
"""The file, in this pod's emptyDir (`STATE_DIRECTORY`)."""
PROGRESS_SECONDS = 10.0
"""The least time between two progress records of a task: the API server's load bound."""
COUNTED = (("epoch", "epochs"), ("step", "steps"))
"""Counts shown as `name n/total` (`epoch 3/8`), first, when the file has them."""

Numbers = Dict[str, Union[int, float]]


def number_text(value: int | float) -> str:
    """A number as a person reads it: an integer as it is, another in 4 significant digits."""
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()
                                  and math.fabs(value) < 1e15):
        return str(int(value))
    return format(value, ".4g")


def progress_line(numbers: Numbers) -> str:
    """`epoch 3/8, loss 0.21`: the counts first, then every other number, by name; names that
    are not plain words are left out. `ResultRefused` when the line would be too long."""
    parts = []
    shown = set()
    for count, total in COUNTED:
        if count in numbers:
            text = count + " " + number_text(numbers[count])
            if total in numbers:
                text += "/" + number_text(numbers[total])
                shown.add(total)
            parts.append(text)
            shown.add(count)
    for name in sorted(numbers):
        if name not in shown and plain(name):
            parts.append(name + " " + number_text(numbers[name]))
    line = ", ".join(parts)
    if not line or len(line) > PROGRESS_MAXIMUM_BYTES:
        raise ResultRefused("too long or empty", str(len(line)) + " characters")
    return line


def plain(name: str) -> bool:
    """A metric name shown as it is: ASCII letters, digits and `_.-`, at most 32 characters."""
    return (0 < len(name) <= 32 and name.isascii()
            and all(character.isalnum() or character in "_.-" for character in name))


class ProgressReader:
    """The progress a training wrote, read at most every `PROGRESS_SECONDS`; only a changed
    line is returned, and a refused file is said once."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.next_read = 0.0
        self.last = ""
        self.said = ""

    def remove(self) -> None:
        """Progress left by an earlier attempt in this pod is not this training's."""
        if self.path:
            with contextlib.suppress(OSError):
                os.remove(self.path)

    def changed(self, now: float, final: bool = False) -> str | None:
        """The progress line when it is time to look (`final`: the training has ended) and it
        differs from the last one returned."""
        if not self.path or (now < self.next_read and not final):
            return None
        self.next_read = now + PROGRESS_SECONDS
        try:
            line = progress_line(parse_result(read_file(self.path)))
        except FileNotFoundError:
            return None
        except ResultRefused as refusal:
            if str(refusal) != self.said:
                say("the progress in " + self.path + " is not recorded: " + str(refusal))
                self.said = str(refusal)
            return None
        if line == self.last:
            return None
        self.last = line
        return line
