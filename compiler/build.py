"""`tfcompile build`: find job files, load them, compile them, and plan the output tree.

This is the I/O around the pure compiler: it resolves paths (overlays, sources) relative to the
output directory so that the generated kustomizations work wherever the repository is cloned,
and it tells the planner which spec file defines which jobs, so that pruning goes by source.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tfcompile.spec.loading import LoadedJob, discover, display_path, load_jobs
from tfcompile.spec.problems import LocatedProblem, Location, Problem, SpecError

from .build_record import (
    KUSTOMIZATION_NAMES,
    BuildSettings,
    JobInput,
    Reusable,
    SpecInput,
    available_overlays,
    script_digest,
)
from .compile import CompiledJob, compile_job
from .output_tree import Plan, plan

__all__ = ["KUSTOMIZATION_NAMES", "BuildSettings", "Compilation", "available_overlays",
           "build_plan", "compile_all", "compile_inputs", "load_all"]


def _check_overlays(loaded: LoadedJob, available: list[str], overlays: Path) -> list[Problem]:
    problems = []
    for index, name in enumerate(loaded.job.spec.overlays):
        if name not in available:
            known = ", ".join(available) if available else "none"
            problems.append(
                Problem(
                    ("spec", "overlays", index),
                    f"no Kustomize Component {display_path(overlays / name)}/kustomization.yaml; "
                    f"overlays available there: {known}",
                )
            )
    return problems


def _relative(target: Path, start: Path) -> str:
    return Path(os.path.relpath(target.resolve(), start.resolve())).as_posix()


def load_all(inputs: Sequence[Path], skipped: Collection[Path] = (),
             found: Sequence[Path] | None = None) -> list[LoadedJob]:
    """Every job of every input (none when the inputs exist but hold no job), leaving out the
    files `skipped`; raises one `SpecError` with the problems of all files. `found` is what
    `discover` gives for the inputs, when the caller has it."""
    if found is None:
        found = list(dict.fromkeys(discover(inputs)))
    files = [path for path in found if path not in skipped]
    problems: list[LocatedProblem] = []
    loaded: list[LoadedJob] = []
    for path in inputs:
        if not path.exists():
            problems.append(LocatedProblem(Location(display_path(path), 1, 1), (),
                                           "no such file or directory"))
    for path in files:
        try:
            loaded.extend(load_jobs(path))
        except SpecError as error:
            problems.extend(error.problems)
    seen: dict[str, LoadedJob] = {}
    for job in loaded:
        name = job.job.metadata.name
        if name in seen:
            first = seen[name].locations.locate(("metadata", "name"))
            problems.append(
                job.locate(Problem(("metadata", "name"),
                                   f"job {name!r} is also defined at {first}; each job needs its "
                                   "own name (it names the output directory)"))
            )
        seen.setdefault(name, job)
    if problems:
        raise SpecError(problems)
    return loaded


@dataclass(frozen=True)
class Compilation:
    """The compiled jobs, and for every spec file read (resolved) the jobs it defines; what
    was read, for the up-to-date record (`build_record`)."""

    jobs: list[CompiledJob]
    defined: dict[Path, frozenset[str]]
    specs: list[SpecInput] = field(default_factory=list)
    inputs: list[JobInput] = field(default_factory=list)


def compile_inputs(settings: BuildSettings,
                   reusable: Mapping[Path, Reusable] | None = None) -> Compilation:
    """Compile every job found in the inputs, or raise one `SpecError` with every problem.

    The jobs of `reusable` spec files (by the up-to-date record, `build_record.reusable`) are
    taken from the output tree instead of being loaded and compiled; when one of their names
    is also defined by a file that is loaded, everything is loaded, to report that as always."""
    found = list(dict.fromkeys(discover(settings.inputs)))
    discovered = set(found)
    reused = {path: item for path, item in (reusable or {}).items() if path in discovered}
    loaded = load_all(settings.inputs, reused, found)
    names = {job.job.metadata.name for job in loaded}
    if any(name in names for item in reused.values() for name in item.spec.jobs):
        reused = {}
        loaded = load_all(settings.inputs, (), found)
    available = available_overlays(settings.overlays)
    problems: list[LocatedProblem] = []
    compiled: list[CompiledJob] = []
    defined: dict[Path, set[str]] = {}
    for job in loaded:
        defined.setdefault(job.source.resolve(), set()).add(job.job.metadata.name)
        overlay_problems = _check_overlays(job, available, settings.overlays)
        if overlay_problems:
            problems.extend(job.locate(problem) for problem in overlay_problems)
            continue
        directory = settings.output / job.job.metadata.name
        components = [_relative(settings.overlays / name, directory)
                      for name in job.job.spec.overlays]
        try:
            result = compile_job(job, _relative(job.source, directory), components)
        except SpecError as error:
            problems.extend(error.problems)
            continue
        # Only the text is written: memory per job is its files, not its objects as well.
        compiled.append(CompiledJob(result.name, [], result.files))
    if problems:
        raise SpecError(problems)
    specs: dict[Path, SpecInput] = {}
    for job in loaded:
        known = specs.get(job.source)
        defines = (*known.jobs, job.job.metadata.name) if known else (job.job.metadata.name,)
        specs[job.source] = SpecInput(job.source, job.source_digest, defines)
    inputs = [JobInput(job.job.metadata.name, job.source, job.job.spec.script,
                       script_digest(job.script), tuple(job.job.spec.overlays))
              for job in loaded]
    for path, item in reused.items():
        defined[path.resolve()] = set(item.spec.jobs)
        specs[path] = item.spec
        inputs.extend(item.jobs)
        compiled.extend(CompiledJob(name, [], files) for name, files in item.outputs.items())
    return Compilation(sorted(compiled, key=lambda job: job.name),
                       {path: frozenset(names) for path, names in defined.items()},
                       list(specs.values()), inputs)


def compile_all(settings: BuildSettings) -> list[CompiledJob]:
    """Compile every job found in the inputs, or raise one `SpecError` with every problem."""
    return compile_inputs(settings).jobs


def build_plan(settings: BuildSettings, compilation: Compilation | None = None) -> Plan:
    """The plan for the output tree as it is now (call under the tree's lock to write it)."""
    compilation = compilation or compile_inputs(settings)
    return plan(settings.output, compilation.jobs, compilation.defined)
