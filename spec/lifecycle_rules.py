"""Rules of a job's lifecycle fields (`deadline`, `onFailure`), each reported at its field.

A deadline's form is the models' (hours, minutes, seconds); its range is checked here, so the
error names the field and says what is allowed. The launcher keeps the deadline's clock and
releases a job that gave up (`compiler/launcher/program.py`).
"""

from __future__ import annotations

from collections.abc import Iterator

from .models import LONGEST_DEADLINE_SECONDS, JobSpec
from .problems import Problem


def check_lifecycle(spec: JobSpec) -> Iterator[Problem]:
    """The problems of `deadline` and `onFailure`."""
    seconds = spec.deadline_seconds()
    if seconds is not None and not 1 <= seconds <= LONGEST_DEADLINE_SECONDS:
        yield Problem(("spec", "deadline"), (
            f"{spec.deadline} is {seconds} s; give at least 1s and at most "
            f"{LONGEST_DEADLINE_SECONDS // 3600}h"))
