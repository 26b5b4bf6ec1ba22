"""Rules of a job's lifecycle fields (`deadline`, `onFailure`), each reported at its field.

A deadline's form is the models' (hours, minutes, seconds); its range is checked here, so the
error names the field and says what is allowed. A lifecycle field the launcher does not act on
is refused rather than accepted and ignored: a job that silently trains past its deadline, or
holds its GPUs after giving up, costs what the field was written to save.
"""

from __future__ import annotations

from collections.abc import Iterator

from .models import LONGEST_DEADLINE_SECONDS, JobSpec, OnFailure
from .problems import Problem


def check_lifecycle(spec: JobSpec) -> Iterator[Problem]:
    """The problems of `deadline` and `onFailure`."""
    seconds = spec.deadline_seconds()
    if seconds is not None and not 1 <= seconds <= LONGEST_DEADLINE_SECONDS:
        yield Problem(("spec", "deadline"), (
            f"{spec.deadline} is {seconds} s; give at least 1s and at most "
            f"{LONGEST_DEADLINE_SECONDS // 3600}h"))
    if spec.deadline is not None:
        yield Problem(("spec", "deadline"), (
            "this version's launcher does not stop a revision at a deadline yet; remove "
            "deadline (a job is never stopped for its training time)"))
    if spec.on_failure is OnFailure.RELEASE:
        yield Problem(("spec", "onFailure"), (
            "this version's launcher does not release a job that gave up yet; remove "
            "onFailure or set it to idle (the job's pods stay and idle)"))
