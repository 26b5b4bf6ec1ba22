"""Rules of a job's lifecycle fields (`deadline`, `launcher`), each reported at its field.

A deadline's form is the models' (hours, minutes, seconds); its range is checked here, so the
error names the field and says what is allowed. The launcher keeps the deadline's clock and
releases a job that gave up (`compiler/launcher/program.py`).

A job with `launcher: none` runs its command without the launcher (images without Python 3.8,
such as TensorFlow 1.x's), so every field only the launcher acts on is refused at its place:
`onSuccess` and `onFailure` (the launcher idles or releases), `failurePolicy` (it counts the
failures), `deadline` (it keeps the clock) and a sweep's `objective` (it records the results
the objective ranks). Written with either value, onSuccess and onFailure are refused: `idle`
too is the launcher's doing.
"""

from __future__ import annotations

from collections.abc import Iterator

from .models import LONGEST_DEADLINE_SECONDS, JobSpec, Launcher
from .problems import Problem


def check_lifecycle(spec: JobSpec) -> Iterator[Problem]:
    """The problems of `deadline` and of the fields `launcher: none` leaves without effect."""
    seconds = spec.deadline_seconds()
    if seconds is not None and not 1 <= seconds <= LONGEST_DEADLINE_SECONDS:
        yield Problem(("spec", "deadline"), (
            f"{spec.deadline} is {seconds} s; give at least 1s and at most "
            f"{LONGEST_DEADLINE_SECONDS // 3600}h"))
    yield from _check_without_launcher(spec)


_NO_LAUNCHER = "needs tfcompile's launcher, which this job turns off (launcher: none)"
_OR_LAUNCHER = "or run an image with Python 3.8 or later and remove launcher: none"


def _check_without_launcher(spec: JobSpec) -> Iterator[Problem]:
    if spec.launcher is not Launcher.NONE:
        return
    fields = spec.model_fields_set
    if "on_success" in fields:
        yield Problem(("spec", "onSuccess"), (
            f"{_NO_LAUNCHER}: the launcher idles a task that succeeded, or releases the job; "
            f"without it an exit 0 restarts the training: remove onSuccess, {_OR_LAUNCHER}"))
    if "on_failure" in fields:
        yield Problem(("spec", "onFailure"), (
            f"{_NO_LAUNCHER}: the launcher idles or releases a job that gave up; without it "
            f"nothing gives up: remove onFailure, {_OR_LAUNCHER}"))
    if spec.failure_policy is not None:
        yield Problem(("spec", "failurePolicy"), (
            f"{_NO_LAUNCHER}: the launcher counts a task's failures and stops it; without it "
            f"the kubelet restarts a failing command for ever, with back-off: remove "
            f"failurePolicy, {_OR_LAUNCHER}"))
    if spec.deadline is not None:
        yield Problem(("spec", "deadline"), (
            f"{_NO_LAUNCHER}: the launcher keeps a revision's clock and stops its training: "
            f"remove deadline (suspend: true stops a job), {_OR_LAUNCHER}"))
    if spec.sweep is not None and spec.sweep.objective is not None:
        yield Problem(("spec", "sweep", "objective"), (
            f"{_NO_LAUNCHER}: the launcher records a trial's result, which the objective "
            f"ranks; remove objective (the trials still run, and tfcompile status lists them "
            f"by their values), {_OR_LAUNCHER}"))
