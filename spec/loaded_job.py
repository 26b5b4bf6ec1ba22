"""A job as loaded: the valid spec, the file it came from, its script and its values' positions.

What the loader (`loading.py`) hands the compiler, and all the compiler proper knows of the
input: plain data, apart from the loader, which reads files and parses YAML, so that the compiler
proper imports neither. The job file is named by its path's text (`source`): the compiler proper
opens no file, and the output layer, which does, makes a path of it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .models import TrainingJob
from .positions import Locations
from .problems import LocatedProblem, Problem, SpecError
from .shipped_script import Script
from .sweep import Trial


@dataclass(frozen=True)
class LoadedJob:
    """A valid job spec with its source file, script and value positions."""

    job: TrainingJob
    source: str
    """The job file, as the loader was given it (a path's text)."""
    script: Script | None
    locations: Locations
    source_digest: str = ""
    """SHA-256 of the bytes of `source` this job was loaded from (hex)."""
    trial: Trial | None = None
    """For one trial of a sweep (`compiler.objects.sweep.trials`): its point; `job` is then
    the trial's job, named for it."""
    sweep_board: str | None = None
    """For the one TensorBoard of a sweep (`compiler.objects.sweep.sweep_board`): the sweep's
    name; `job` is then the sweep's job named `<sweep>-tensorboard`, which compiles to that
    TensorBoard alone, in an output directory of its own beside the trials'."""

    def locate(self, problem: Problem) -> LocatedProblem:
        location = self.locations.locate(problem.path, key=problem.key)
        return LocatedProblem(location, problem.path, problem.message)

    def fail(self, problems: Iterable[Problem]) -> SpecError:
        return SpecError([self.locate(problem) for problem in problems])
