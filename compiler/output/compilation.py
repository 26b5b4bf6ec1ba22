"""Find job files, load them, compile them, and plan the output tree: the work of a build.

This is the I/O around the pure compiler: it resolves paths (overlays, sources) relative to the
output directory so that the generated kustomizations work wherever the repository is cloned,
and it tells the planner which spec file defines which jobs, so that pruning goes by source. A
spec with `sweep:` defines one job per trial (`objects.sweep.trials`), and with `tensorboard:`
one more directory, the sweep's TensorBoard (`objects.sweep.sweep_board`): a trial whose point
left the grid, or a TensorBoard the spec no longer asks for, is a job its spec no longer
defines, and is pruned as one.

Besides the files that look like job specs, a build loads the specs the output tree names as
its jobs' sources when they lie in a directory searched (`build --check`: wherever they lie), so
that a job file that no longer looks like one is loaded, and refused, rather than passed over;
each problem of such a file comes with a note naming the job it keeps.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tfcompile.compiler.objects.sweep import sweep_jobs
from tfcompile.compiler.output.job_files import CompiledJob, compile_job
from tfcompile.compiler.output.location import OutputLocation
from tfcompile.compiler.output.ownership import kept_note
from tfcompile.compiler.output.tree import Plan, plan, recorded_sources
from tfcompile.spec.loaded_job import LoadedJob
from tfcompile.spec.loading import discover, display_path, load_jobs
from tfcompile.spec.problems import LocatedProblem, Location, Problem, SpecError
from tfcompile.spec.suggestions import did_you_mean

from .build_record import (
    KUSTOMIZATION_NAMES,
    BuildSettings,
    JobInput,
    Reusable,
    SpecInput,
    available_overlays,
    script_digest,
)
from .text_spool import TextSpool

__all__ = ["KUSTOMIZATION_NAMES", "BuildSettings", "Compilation", "available_overlays",
           "build_plan", "compile_all", "compile_inputs", "searched_sources"]


def _check_overlays(loaded: LoadedJob, available: list[str], overlays: Path) -> list[Problem]:
    problems = []
    for index, name in enumerate(loaded.job.spec.overlays):
        if name not in available:
            known = ", ".join(available) if available else "none"
            problems.append(
                Problem(
                    ("spec", "overlays", index),
                    f"no Kustomize Component {display_path(overlays / name)}/kustomization.yaml; "
                    f"overlays available there: {known}" + did_you_mean(name, available),
                )
            )
    return problems


def _relative(target: Path, start: str) -> str:
    """`target` (resolved) relative to `start`, a path without links."""
    return Path(os.path.relpath(target.resolve(), start)).as_posix()


@dataclass(frozen=True)
class Compilation:
    """The compiled jobs, and for every spec file read (resolved) the jobs it defines; what
    was read, for the up-to-date record (`build_record`)."""

    jobs: list[CompiledJob]
    defined: dict[Path, frozenset[str]]
    specs: list[SpecInput] = field(default_factory=list)
    inputs: list[JobInput] = field(default_factory=list)


def searched_sources(settings: BuildSettings, recorded: Mapping[str, Path], *,
                     everywhere: bool = False) -> dict[str, Path]:
    """Of the sources the output tree records (job -> spec, `tree.recorded_sources`), those a
    build of `settings` loads: each inside an input directory or named as an input, or with
    `everywhere` (`build --check`) all of them."""
    if everywhere:
        return dict(recorded)
    inputs = [os.path.realpath(path) for path in settings.inputs]
    return {job: source for job, source in recorded.items()
            if any(real == directory or real.startswith(directory.rstrip("/") + "/")
                   for real in [os.path.realpath(source)] for directory in inputs)}


def compile_inputs(settings: BuildSettings, reusable: Mapping[Path, Reusable] | None = None,
                   output: str | None = None,
                   recorded: Mapping[str, Path] | None = None) -> Compilation:
    """Compile every job found in the inputs, or raise one `SpecError` with every problem.

    `output` is the output directory's path without links (`output_location`), from which
    each job's kustomization names its spec and overlays; by default `settings.output`
    resolved. `recorded` (job -> spec, `searched_sources`) adds the specs the output tree
    names to those found, and a problem of one of them says which job it keeps. The jobs of
    `reusable` spec files (by the up-to-date record, `build_record.reusable`) are taken from
    the output tree instead of being loaded and compiled; when one of their names is also
    defined by a file that is loaded, everything is loaded, to report that as always. Which
    jobs a reused file defines is left out of `Compilation.defined`: what is pruned is never
    decided by the record."""
    recorded = recorded or {}
    found = list(dict.fromkeys(discover(settings.inputs, recorded.values())))
    discovered = set(found)
    reused = {path: item for path, item in (reusable or {}).items() if path in discovered}
    real_output = output if output is not None else os.fspath(settings.output.resolve())
    compilation = _compile_files(settings, found, reused, real_output, recorded)
    if compilation is None:
        compilation = _compile_files(settings, found, {}, real_output, recorded)
    assert compilation is not None
    return compilation


def _kept_notes(path: Path, recorded: Mapping[str, Path],
                settings: BuildSettings) -> list[LocatedProblem]:
    """A note for each job the output tree records as compiled from `path`, which fails."""
    real = os.path.realpath(path)
    return [kept_note(path, job, settings.output / job)
            for job, source in sorted(recorded.items()) if os.path.realpath(source) == real]


def _compile_files(settings: BuildSettings, found: Sequence[Path],
                   reused: Mapping[Path, Reusable], output: str,
                   recorded: Mapping[str, Path]) -> Compilation | None:
    """Load and compile the files `found` one at a time, keeping of each job only its files
    (in a `TextSpool`) and what the record needs, so that memory does not grow with the number
    of jobs. Problems are reported as if every file were loaded first: those of loading (all
    files, then names defined twice), or else those of compiling. None when a loaded job has
    the name of a `reused` one."""
    reused_names = {name for item in reused.values() for name in item.spec.jobs}
    available = available_overlays(settings.overlays)
    spool = TextSpool()
    load_problems = [LocatedProblem(Location(display_path(path), 1, 1), (),
                                    "no such file or directory")
                     for path in settings.inputs if not path.exists()]
    twice: list[LocatedProblem] = []
    compile_problems: list[LocatedProblem] = []
    first: dict[str, Location] = {}
    boards: dict[str, str] = {}  # a sweep's TensorBoard's name -> the sweep's
    compiled: list[CompiledJob] = []
    defined: dict[Path, set[str]] = {}
    specs: dict[Path, SpecInput] = {}
    inputs: list[JobInput] = []
    for path in found:
        if path in reused:
            continue
        try:
            documents = load_jobs(path)
        except SpecError as error:
            load_problems.extend([*error.problems, *_kept_notes(path, recorded, settings)])
            continue
        loaded: list[LoadedJob] = []
        sweeps: dict[str, int] = {}  # the first trial of each sweep -> its number of trials
        for document in documents:  # a sweep is one job per trial (and its board) from here
            try:
                expanded = sweep_jobs(document)
            except SpecError as error:
                load_problems.extend([*error.problems,
                                      *_kept_notes(path, recorded, settings)])
                continue
            if document.job.spec.sweep is not None:
                sweeps[expanded[0].job.metadata.name] = sum(
                    1 for job in expanded if job.trial is not None)
            loaded.extend(expanded)
        too_large: set[str] = set()  # sweeps refused for their size: their other trials skipped
        for job in loaded:
            name = job.job.metadata.name
            if name in reused_names:
                return None
            if name in first:
                board = job.sweep_board or boards.get(name)
                twice.append(job.locate(Problem(
                    ("metadata", "name"), f"job {name!r} is also defined at {first[name]}"
                    + (f" (the TensorBoard of sweep {board!r} is named so)" if board else "")
                    + "; each job needs its own name (it names the output directory)")))
                continue
            first[name] = job.locations.locate(("metadata", "name"))
            if job.sweep_board is not None:
                boards[name] = job.sweep_board
            source = Path(job.source)
            defined.setdefault(source.resolve(), set()).add(name)
            known = specs.get(source)
            specs[source] = SpecInput(source, job.source_digest,
                                      (*known.jobs, name) if known else (name,))
            inputs.append(JobInput(name, source, job.job.spec.script,
                                   script_digest(job.script), tuple(job.job.spec.overlays)))
            if load_problems or twice:
                continue  # only the problems of loading will be reported: compile nothing
            sweep = job.trial.sweep if job.trial is not None else job.sweep_board
            if sweep in too_large:
                continue
            result = _compile(settings, job, available, compile_problems, output)
            if result is not None and name in sweeps:
                problem = _sweep_size_problem(job, result, sweeps[name])
                if problem is not None:
                    compile_problems.append(problem)
                    assert job.trial is not None
                    too_large.add(job.trial.sweep)
            if result is not None and not compile_problems:
                compiled.append(CompiledJob(result.name, [], spool.keep(result.files)))
    if load_problems or twice:
        raise SpecError([*load_problems, *twice])
    if compile_problems:
        raise SpecError(compile_problems)
    for path, item in reused.items():
        specs[path] = item.spec
        inputs.extend(item.jobs)
        compiled.extend(CompiledJob(name, [], files) for name, files in item.outputs.items())
    return Compilation(sorted(compiled, key=lambda job: job.name),
                       {path: frozenset(names) for path, names in defined.items()},
                       list(specs.values()), inputs)


MAXIMUM_SWEEP_OUTPUT_BYTES = 10 * 1024 * 1024
"""What one sweep's trials may write together: each trial is a job directory of its own (its
launcher, script and objects), so a grid multiplies a job's output. A job within the spec's
limits writes at most a few hundred kilobytes; a sweep of 100 trials of the examples' size
writes about 6 MB. At this bound the worst shape (every value a file may hold an environment
variable, in each of 100 trials) builds in under 2 s of CPU (tests/test_worst_shapes.py)."""


def _sweep_size_problem(first: LoadedJob, result: CompiledJob,
                        count: int) -> LocatedProblem | None:
    """A problem when `count` trials the size of the first one (`result`) would write more
    than `MAXIMUM_SWEEP_OUTPUT_BYTES`, checked before the other trials are compiled."""
    size = sum(len(text.encode("utf-8")) for text in result.files.values())
    if size * count <= MAXIMUM_SWEEP_OUTPUT_BYTES:
        return None
    megabytes = MAXIMUM_SWEEP_OUTPUT_BYTES // (1024 * 1024)
    return first.locate(Problem(
        ("spec", "sweep"),
        f"the sweep's {count} trials would write about {size * count / 1024 / 1024:.0f} MB "
        f"({size / 1024:.0f} KB each: every trial is a job directory of its own); a sweep may "
        f"write at most {megabytes} MB: give fewer values, or make each trial smaller (fewer "
        "environment values, a smaller script folder)"))


def _compile(settings: BuildSettings, job: LoadedJob, available: list[str],
             problems: list[LocatedProblem], output: str) -> CompiledJob | None:
    """One job compiled, or None with its problems added to `problems`."""
    overlay_problems = _check_overlays(job, available, settings.overlays)
    if overlay_problems:
        problems.extend(job.locate(problem) for problem in overlay_problems)
        return None
    directory = os.path.join(output, job.job.metadata.name)
    components = [_relative(settings.overlays / name, directory)
                  for name in job.job.spec.overlays]
    try:
        return compile_job(job, _relative(Path(job.source), directory), components)
    except SpecError as error:
        problems.extend(error.problems)
        return None


def compile_all(settings: BuildSettings) -> list[CompiledJob]:
    """Compile every job found in the inputs, or raise one `SpecError` with every problem."""
    return compile_inputs(settings).jobs


def build_plan(settings: BuildSettings, location: OutputLocation,
               compilation: Compilation | None = None) -> Plan:
    """The plan for the output tree at `location` as it is now (`output_lock.locked` gives
    it, under the tree's lock)."""
    if compilation is None:
        recorded = searched_sources(settings, recorded_sources(location))
        compilation = compile_inputs(settings, output=location.real, recorded=recorded)
    return plan(location, compilation.jobs, compilation.defined)
