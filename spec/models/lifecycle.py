"""What happens as a job's pods end and change: the replica compatibility of a roll, onSuccess,
onFailure, the failure policy and the deadline, together because the launcher acts on them all,
and whether the job runs the launcher at all.
"""

import re
from enum import StrEnum
from typing import Annotated

from pydantic import (
    Field,
    StrictInt,
    StringConstraints,
)

from .base import SpecModel, _no_items


class Compatibility(StrEnum):
    """An earlier tool whose scripts read variables of their own (set only for jobs that ask)."""

    TF_SPAWNER = "tf-spawner"
    ELASTICDL = "elasticdl"
    TF1_FLAGS = "tf1-flags"


class Launcher(StrEnum):
    """What runs the training command in the `tensorflow` container."""

    PYTHON = "python"
    """tfcompile's launcher (a Python 3.8+ program) around the command: the image needs it."""
    NONE = "none"
    """The command itself, for images without Python 3.8 (TensorFlow 1.x images): nothing
    records success or failure, and the fields that need the launcher are refused."""


class OnSuccess(StrEnum):
    """What the job's pods do once the job has succeeded."""

    IDLE = "idle"
    RELEASE = "release"


class OnFailure(StrEnum):
    """What the job's pods do once the job has given up (failurePolicy or deadline)."""

    IDLE = "idle"
    RELEASE = "release"


DURATION_PATTERN = (
    r"^([0-9]{1,5}h([0-9]{1,6}m)?([0-9]{1,7}s)?|[0-9]{1,6}m([0-9]{1,7}s)?|[0-9]{1,7}s)$"
)
DURATION_UNITS = {"h": 3600, "m": 60, "s": 1}
LONGEST_DEADLINE_SECONDS = 366 * 24 * 3600
Duration = Annotated[str, StringConstraints(strict=True, pattern=DURATION_PATTERN)]


def duration_seconds(duration: str) -> int:
    """The seconds of a duration such as `48h`, `90m` or `1h30m` (hours, minutes, seconds)."""
    return sum(int(amount) * DURATION_UNITS[unit]
               for amount, unit in re.findall(r"([0-9]+)([hms])", duration))


ExitCode = Annotated[StrictInt, Field(ge=1, le=255)]


class FailurePolicy(SpecModel):
    """When a failing task stops retrying: it records the failure and stops training."""

    max_restarts: Annotated[StrictInt, Field(ge=0, le=100000)] = Field(
        default=10,
        description="Restarts of a task's training command, in one pod, before it stops.",
    )
    do_not_retry_exit_codes: list[ExitCode] = Field(
        default_factory=_no_items,
        description="Exit codes that mean a permanent failure: the task stops at once.",
    )
