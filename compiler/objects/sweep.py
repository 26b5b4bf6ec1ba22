"""A sweep's trials as jobs of their own: the one step between a loaded spec and the builders.

A job with `sweep:` compiles to one job per point of its grid (`spec.sweep.points`). Each trial
is the spec's job renamed `J-<digest of its point>` (`names.trial_name`), labelled with the
sweep's name on every object (`tfcompile.dev/sweep`, never in a selector), and carried with its
point (`LoadedJob.trial`), which the builders turn into the training's variables and the state
ConfigMap's annotations. Everything after this step sees ordinary jobs: their own output
directories, Argo CD Applications, pods and state; a point removed from the grid is a job its
spec no longer defines, and its directory is pruned like any other.

A sweep with `tensorboard:` gets one TensorBoard over every trial's logs, not one per trial:
the trials share one claim (`existingClaim`: a claim per trial is refused at
`spec.tensorboard`), each logging under a directory of its own, and one TensorBoard reading
`logDir` shows each of those directories as a run. It is compiled as a job-like directory of
its own, `<sweep>-tensorboard` (`sweep_board`), that the spec defines beside its trials: it
applies alone (an Argo CD Application of its own), adding or removing a trial leaves it as it
is, and it is pruned by the same rule as a trial, when the spec is gone or no longer defines
it (no `sweep:`, or no `tensorboard:`). The trials themselves get no TensorBoard.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from tfcompile.spec.loaded_job import LoadedJob
from tfcompile.spec.problems import Problem
from tfcompile.spec.sweep import RESULT_VARIABLE, TRIAL_VARIABLE, Trial, points

from .labels import SWEEP_LABEL
from .launcher_interface import RESULT_FILE
from .names import check_name_lengths, tensorboard_name, trial_name

__all__ = ["sweep_board", "sweep_jobs", "trial_environment", "trial_values", "trials"]


def trials(loaded: LoadedJob) -> list[LoadedJob]:
    """The jobs a loaded spec compiles to: itself, or one per point of its sweep. Raises
    `SpecError` when the trials' names are too long or two points share a name."""
    found = points(loaded.job)
    if not found:
        return [loaded]
    expanded: list[LoadedJob] = []
    seen: dict[str, Trial] = {}
    for point in found:
        name = trial_name(point.sweep, point.values)
        if name in seen:
            raise loaded.fail([Problem(
                ("spec", "sweep", "parameters"),
                f"two points of the grid ({_shown(seen[name])} and {_shown(point)}) have the "
                f"same name {name!r} (a digest of their values): change one of the values")])
        seen[name] = point
        metadata = loaded.job.metadata
        labels = {**metadata.labels, SWEEP_LABEL: point.sweep}
        job = loaded.job.model_copy(update={
            "metadata": metadata.model_copy(update={"name": name, "labels": labels}),
            "spec": loaded.job.spec.model_copy(update={"sweep": None, "tensorboard": None}),
        })
        if not expanded:
            problems = list(check_name_lengths(job, given=point.sweep))
            if problems:  # every trial's name has the same length: said once
                raise loaded.fail(problems)
        expanded.append(dataclasses.replace(loaded, job=job, trial=point))
    return expanded


def sweep_board(loaded: LoadedJob) -> LoadedJob | None:
    """The sweep's one TensorBoard as a job of its own named `<sweep>-tensorboard`, labelled
    with the sweep's name as its trials are; None for a job that is no sweep or has none.
    Its name fits wherever the trials' do: a trial's StatefulSet name is longer."""
    job = loaded.job
    if job.spec.sweep is None or job.spec.tensorboard is None:
        return None
    sweep = job.metadata.name
    metadata = job.metadata
    labels = {**metadata.labels, SWEEP_LABEL: sweep}
    board = job.model_copy(update={
        "metadata": metadata.model_copy(update={"name": tensorboard_name(sweep),
                                                "labels": labels}),
        "spec": job.spec.model_copy(update={"sweep": None}),
    })
    return dataclasses.replace(loaded, job=board, script=None, sweep_board=sweep)


def sweep_jobs(loaded: LoadedJob) -> list[LoadedJob]:
    """Every job-like directory a loaded spec compiles to: its trials (or itself), then the
    sweep's TensorBoard when it has one. Raises `SpecError` as `trials` does."""
    board = sweep_board(loaded)
    return [*trials(loaded), *([] if board is None else [board])]


def _shown(point: Trial) -> str:
    return ", ".join(f"{name}={value!r}" for name, value in point.values)


def trial_environment(trial: Trial | None, name: str,
                      records_result: bool = True) -> list[dict[str, Any]]:
    """A trial's variables, before the job's own: its name, where it may write its result
    (unless nothing records it: a job without the launcher), then its point, by parameter name.
    None for a job that is no trial."""
    if trial is None:
        return []
    result = [{"name": RESULT_VARIABLE, "value": RESULT_FILE}] if records_result else []
    return [{"name": TRIAL_VARIABLE, "value": name}, *result,
            *({"name": parameter, "value": value} for parameter, value in trial.values)]


def trial_values(trial: Trial) -> str:
    """The point as the state ConfigMap's annotation holds it: compact JSON, sorted."""
    return json.dumps(dict(trial.values), sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False)
