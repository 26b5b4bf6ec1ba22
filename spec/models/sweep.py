"""A hyperparameter sweep: the values of each trial and the objective that orders the results.
"""

from enum import StrEnum
from typing import Annotated

from pydantic import (
    Field,
    StringConstraints,
)

from .base import METRIC_NAME_PATTERN, EnvironmentName, SpecModel


class Goal(StrEnum):
    """Which end of a sweep's objective metric is best."""

    MAXIMIZE = "maximize"
    MINIMIZE = "minimize"


SweepValue = Annotated[str, StringConstraints(strict=True, max_length=256)]
MetricName = Annotated[str, StringConstraints(strict=True, pattern=METRIC_NAME_PATTERN)]


class Objective(SpecModel):
    """How `tfcompile status` ranks a sweep's trials: by one metric of their results."""

    metric: MetricName
    goal: Goal = Goal.MAXIMIZE


class Sweep(SpecModel):
    """A grid of values: the job compiles to one trial (a job of its own) per point."""

    parameters: dict[EnvironmentName, list[SweepValue]] = Field(
        description="Environment variable -> its values (strings); every combination is a "
        "trial, whose training sees one value of each as that variable ($(NAME) in args).",
    )
    objective: Objective | None = Field(
        default=None,
        description="The metric of the trials' results (the JSON object a training writes at "
        "$TFCOMPILE_RESULT_FILE) by which `tfcompile status` puts the best trial first.",
    )
