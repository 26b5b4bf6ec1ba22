"""A sweep's grid: its points, what a trial is, and the rules that keep a grid small and clear.

A job with `sweep:` stands for one job (a trial) per point of the grid of its parameters: the
product of every parameter's values. Each trial is a job of its own (its own output directory,
Argo CD Application, pods and state), named by a digest of its point's values (the compiler's
`names.trial_name`), so that adding a value to the grid adds trials and renames none.

A trial's training sees its point as environment variables, set before the job's own (so
`$(NAME)` works in `args` and in `env` values), with `TFCOMPILE_TRIAL` (its name, for a
checkpoint directory of its own on a shared claim) and `TFCOMPILE_RESULT_FILE` (where it may
write a JSON object of metrics, which the launcher records in the job's state).

The rules here refuse what would make a grid ambiguous or too big: no parameter or value, a
value given twice, a parameter that is also one of the job's variables (which value would the
training see?) or one tfcompile sets, and more than `MAXIMUM_TRIALS` points.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass

from .models import Objective, Sweep, TrainingJob
from .problems import Problem

MAXIMUM_TRIALS = 100
"""Trials of one sweep: each is a job with its own pods, Application and output directory (and
a file may define at most as many jobs, trials counted: `loading.load_jobs`)."""

TRIAL_VARIABLE = "TFCOMPILE_TRIAL"
"""A trial's name, in every container of its training pods."""

RESULT_VARIABLE = "TFCOMPILE_RESULT_FILE"
"""Where a trial's training may write its result (a JSON object of metrics)."""

SWEEP_VARIABLES = (TRIAL_VARIABLE, RESULT_VARIABLE)


@dataclass(frozen=True)
class Trial:
    """One point of a sweep: the job name the spec gives, the point's values (sorted by
    parameter name) and the sweep's objective."""

    sweep: str
    values: tuple[tuple[str, str], ...]
    objective: Objective | None


def trial_count(sweep: Sweep) -> int:
    return math.prod(len(values) for values in sweep.parameters.values())


def points(job: TrainingJob) -> list[Trial]:
    """Every point of the job's grid (none without `sweep`), in the order of the values."""
    sweep = job.spec.sweep
    if sweep is None:
        return []
    names = sorted(sweep.parameters)
    return [Trial(job.metadata.name, tuple(zip(names, combination, strict=True)),
                  sweep.objective)
            for combination in itertools.product(*(sweep.parameters[name] for name in names))]


def _check_board(job: TrainingJob) -> Iterator[Problem]:
    """A sweep's TensorBoard is one, over every trial's logs, so it needs the one claim every
    trial mounts: with `storage.shared.size` each trial gets a claim of its own, which no one
    TensorBoard can read, and a board per trial (a Deployment and a Service each, a load
    balancer each with `LoadBalancer`) is not what comparing trials asks for."""
    shared = job.spec.storage.shared
    if job.spec.tensorboard is None or shared is None or shared.existing_claim is not None:
        return  # no shared storage at all: the TensorBoard's own rule says so at logDir
    yield Problem(("spec", "tensorboard"),
                  "a sweep has one TensorBoard over all its trials, and it reads one claim, but "
                  "with storage.shared.size every trial gets a claim of its own: give "
                  "storage.shared.existingClaim instead (every trial mounts it; have each log "
                  "under a directory of its own, $(TFCOMPILE_TRIAL)), or remove tensorboard")


def check_sweep(job: TrainingJob, reserved: tuple[str, ...]) -> Iterator[Problem]:
    """The problems of the job's `sweep`; `reserved` are the variables tfcompile sets."""
    sweep = job.spec.sweep
    if sweep is None:
        return
    where = ("spec", "sweep", "parameters")
    if not sweep.parameters:
        yield Problem(where, "give at least one parameter: an environment variable and the "
                      "list of its values")
        return
    defined = {"spec.env": job.spec.env}
    defined.update({f"spec.roles.{name.value}.env": role.env
                    for name, role in job.spec.roles.defined()})
    for name, values in sweep.parameters.items():
        if name in reserved:
            yield Problem((*where, name), "this variable is set by tfcompile; choose another "
                          f"name (tfcompile sets: {', '.join(reserved)})", key=True)
        for place, environment in defined.items():
            if name in environment:
                yield Problem((*where, name), f"also set in {place}: each trial sets it to "
                              "one of the values here; remove it there", key=True)
        if not values:
            yield Problem((*where, name), "give at least one value")
        first: dict[str, int] = {}
        for index, value in enumerate(values):
            if value in first:
                yield Problem((*where, name, index), f"this value is also at [{first[value]}]; "
                              "each value makes trials of its own: give it once")
            first.setdefault(value, index)
    yield from _check_board(job)
    count = trial_count(sweep)
    if count > MAXIMUM_TRIALS:
        sizes = " x ".join(str(len(values)) for values in sweep.parameters.values())
        yield Problem(where, f"the grid has {count} points ({sizes}); a sweep may have at most "
                      f"{MAXIMUM_TRIALS} trials, each a job with its own pods: give fewer values "
                      "or split it into several jobs")
