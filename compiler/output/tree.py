"""The output directory: what a build would change, and a diff of it (`writing` writes it).

The plan is computed from the specs and the tree as it is: every job built gets its files; a
job directory not built is pruned only when the spec it records is gone, or loads and no longer
defines it (one that does not load fails the build, `SpecError`). tfcompile touches only its own
files (see `ownership`): a file it would replace but did not write, a directory it did not
generate, or a symbolic link where it would write or delete stops the build before anything is
written. What else the tree holds that tfcompile did not write (a file beside the job
directories, a hand-made directory, a file a job's kustomization does not list) is kept, and
listed in the plan (`Plan.foreign`): `build --check` fails on it, since Argo CD and Flux would
apply it. The tree's README (`tree_readme`) is written by every build, and one
tfcompile did not write is refused.

The plan reads the tree through directories `location` and `directory_handles` opened without
following a link, by names inside them, never through a path again.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from tfcompile.compiler.output.errors import OutputRefused, shown
from tfcompile.compiler.output.generated_mark import KUSTOMIZATION_FILE
from tfcompile.compiler.output.job_files import CompiledJob
from tfcompile.compiler.output.location import OutputLocation
from tfcompile.compiler.output.ownership import (
    JobDirectory,
    generated_directory,
    jobs_defined_in,
    recorded_spec,
    source_path,
    still_defines,
)
from tfcompile.spec.problems import LocatedProblem, SpecError

from .directory_handles import Directory
from .generated_mark import recorded_source
from .tree_readme import README_FILE, README_TEXT, written_by_tfcompile

LEFTOVER_PREFIX = ".tfcompile-"
"""Names tfcompile stages under inside the output directory; reserved, removed by every build."""


@dataclass(frozen=True)
class PlannedPrune:
    """A job directory whose spec no longer defines the job."""

    job: str
    reason: str


class PlannedTexts(Mapping[str, str]):
    """The texts of a plan by path under the output directory (`job/file`), in path order,
    each read from its job's files when asked for: nothing is copied."""

    def __init__(self, jobs: Mapping[str, Mapping[str, str]]) -> None:
        self.jobs = jobs
        self._paths = sorted(f"{job}/{name}" for job, files in jobs.items() for name in files)

    def __getitem__(self, path: str) -> str:
        job, _, name = path.partition("/")
        files = self.jobs.get(job)
        if files is None or name not in files:
            raise KeyError(path)
        return files[name]

    def __contains__(self, path: object) -> bool:
        if not isinstance(path, str):
            return False
        job, _, name = path.partition("/")
        return name in self.jobs.get(job, {})

    def __iter__(self) -> Iterator[str]:
        return iter(self._paths)

    def __len__(self) -> int:
        return len(self._paths)


@dataclass(frozen=True)
class Plan:
    """Changes to the output directory: relative path -> new text, paths to remove, the job
    directories pruned (and why), and per job the entries it holds that tfcompile keeps."""

    location: OutputLocation
    writes: PlannedTexts
    removals: list[str]
    prunes: list[PlannedPrune] = field(default_factory=list)
    kept: dict[str, list[str]] = field(default_factory=dict)
    foreign: list[str] = field(default_factory=list)
    """Each entry of the tree tfcompile did not write, as `path: what it is` (kept)."""
    unjudged: list[str] = field(default_factory=list)
    """Job directories tfcompile generated that this plan neither builds nor prunes."""
    leftovers: list[str] = field(default_factory=list)
    """Entries a killed build left (names under LEFTOVER_PREFIX), which a write removes."""
    top: dict[str, str] = field(default_factory=dict)
    """Files at the top of the output directory to write (name -> text): the tree's README
    when it is missing or not this version's (`tree_readme`)."""

    @property
    def output(self) -> Path:
        """The output directory as the user named it."""
        return self.location.path

    def current(self, relative: str) -> str | None:
        """The text at `relative` (`job/file`, or a file at the top) in the output directory
        now, if any."""
        job, _, name = relative.partition("/")
        if not name:
            output = self.location.directory
            return output.read(job) if output is not None else None
        with job_directory(self.location, job) as directory:
            return directory.read(name) if directory is not None else None

    def new_text(self, relative: str) -> str | None:
        """The text a write puts at `relative` (None: nothing, or the file goes)."""
        return self.top.get(relative) if "/" not in relative else self.writes.get(relative)

    @cached_property
    def changed(self) -> list[str]:
        """Paths whose content would change, sorted (read once)."""
        paths: list[str] = list(self.top)
        for job, files in self.writes.jobs.items():
            with job_directory(self.location, job) as directory:
                paths.extend(f"{job}/{name}" for name, text in files.items()
                             if (directory.read(name) if directory else None) != text)
        return sorted([*paths, *self.removals])

    def changed_jobs(self) -> list[str]:
        return sorted({path.split("/", 1)[0] for path in self.changed if "/" in path})


@contextlib.contextmanager
def job_directory(location: OutputLocation, job: str) -> Iterator[Directory | None]:
    """A job directory, open (None when the output directory or it is missing)."""
    directory = location.directory.open(job) if location.directory is not None else None
    try:
        yield directory
    finally:
        if directory is not None:
            directory.close()


def _is_link(status: os.stat_result) -> bool:
    return stat.S_ISLNK(status.st_mode)


def _plan_built_job(output: Directory, job: CompiledJob, source: Path | None,
                    defined: dict[Path, frozenset[str]], refusals: list[str]
                    ) -> tuple[list[str], list[str]]:
    """Check that `job` may be written; its removals and the entries kept."""
    shown_as = output.path / job.name
    status = output.status(job.name)
    if status is None:
        return [], []
    if _is_link(status):
        refusals.append(f"{shown(shown_as)}: is a symbolic link; tfcompile never follows links "
                        "in the output tree: remove it, or give the job another name")
        return [], []
    if not stat.S_ISDIR(status.st_mode):
        refusals.append(f"{shown(shown_as)}: is a file tfcompile did not write; move it away, "
                        "or give the job another name")
        return [], []
    directory = output.open(job.name)
    if directory is None:
        return [], []
    with directory:
        present = directory.entries()
        generated = _as_compiled(directory, job) or generated_directory(directory)
    if generated is None:
        if present:
            refusals.append(
                f"{shown(shown_as)}: exists and was not written by tfcompile (its "
                f"{KUSTOMIZATION_FILE} has no 'Generated by tfcompile' mark); tfcompile does "
                "not overwrite it: move it away, or give the job another name")
        return [], sorted(present)
    recorded = source_path(generated)
    if (source is not None and recorded is not None and os.path.lexists(recorded)
            and recorded.resolve() != source.resolve()):
        holds, display = still_defines(generated, defined)
        if holds:
            refusals.append(
                f"{shown(shown_as)}: was compiled from {display}, which still defines job "
                f"{job.name}; two specs name job {job.name} (the name is its output "
                "directory): rename one, or delete it")
    owned = set(generated.files)
    foreign = sorted(name for name in job.files if name in present and name not in owned)
    if foreign:
        refusals.append(
            f"{shown(shown_as)}: holds {', '.join(foreign)}, which tfcompile would write but "
            f"did not write (not listed in its {KUSTOMIZATION_FILE}); move "
            f"{'them' if len(foreign) > 1 else 'it'} away, nothing was overwritten")
    links = sorted(name for name in owned | set(job.files)
                   if name in present and _is_link(present[name]))
    if links:
        refusals.append(f"{shown(shown_as)}: {', '.join(links)}: symbolic link where tfcompile "
                        "writes; it never follows links in the output tree, remove it")
    removals = sorted(name for name in owned if name not in job.files and name in present
                      and stat.S_ISREG(present[name].st_mode))
    kept = sorted(name for name in present if name not in owned and name not in job.files)
    return removals, kept


def _as_compiled(directory: Directory, job: CompiledJob) -> JobDirectory | None:
    """The job directory as `generated_directory` reads it, without parsing, when its
    kustomization is byte for byte the one `job` compiles to (it lists the job's other files)."""
    text = directory.read(KUSTOMIZATION_FILE)
    if text is None or text != job.files.get(KUSTOMIZATION_FILE):
        return None
    resources = [name for name in job.files if name != KUSTOMIZATION_FILE]
    return JobDirectory(directory.path, directory.real, [KUSTOMIZATION_FILE, *resources],
                        recorded_source(text.split("\n", 1)[0]))


def _plan_prune(output: Directory, name: str, defined: dict[Path, frozenset[str]],
                prunes: list[PlannedPrune], removals: list[str], kept: dict[str, list[str]],
                refusals: list[str], problems: list[LocatedProblem]) -> bool:
    """Prune the directory `name` (not built) when tfcompile generated it from a spec that is
    gone or loads and no longer defines it; whether the directory is tfcompile's."""
    try:
        directory = output.open(name)
    except OutputRefused:
        return False  # no longer a directory: not tfcompile's to prune
    if directory is None:
        return False
    with directory:
        generated = generated_directory(directory)
        if generated is None:
            return False
        try:
            holds, reason = still_defines(generated, defined, load=True)
        except SpecError as error:
            problems.extend(error.problems)
            return True
        if holds is not False:
            return True
        inside = directory.entries()
    links = sorted(f for f in generated.files if f in inside and _is_link(inside[f]))
    if links:
        refusals.append(f"{shown(directory.path)}: {', '.join(links)}: symbolic link where "
                        "tfcompile would delete; it never follows links in the output "
                        "tree, remove it")
        return True
    prunes.append(PlannedPrune(name, reason))
    removals.extend(f"{name}/{f}" for f in generated.files
                    if f in inside and stat.S_ISREG(inside[f].st_mode))
    kept[name] = sorted(f for f in inside if f not in generated.files)
    return True


def _what_it_is(status: os.stat_result) -> str:
    if _is_link(status):
        return "a symbolic link"
    return "a directory" if stat.S_ISDIR(status.st_mode) else "a file"


def recorded_sources(location: OutputLocation) -> dict[str, Path]:
    """The spec each job directory of the tree names as its source, by job: the path its
    kustomization's first line records, taken lexically from the directory's path without
    links. A build searches these as well (`discover`)."""
    output = location.directory
    found: dict[str, Path] = {}
    for name, status in sorted(output.entries().items() if output is not None else []):
        if name.startswith(LEFTOVER_PREFIX) or not stat.S_ISDIR(status.st_mode):
            continue
        assert output is not None
        try:
            directory = output.open(name)
        except OutputRefused:
            continue
        if directory is None:
            continue
        with directory:
            text = directory.read(KUSTOMIZATION_FILE)
            source = recorded_source(text.split("\n", 1)[0]) if text is not None else None
            if source is not None:
                found[name] = recorded_spec(directory.real, source)
    return found


def plan(location: OutputLocation, jobs: Iterable[CompiledJob],
         defined: Mapping[Path, frozenset[str]] | None = None) -> Plan:
    """The tree `jobs` need, and the job directories whose spec no longer defines them.

    `location` is the output directory as `output_lock.locked` gives it. `defined` maps each
    spec file read (resolved) to the jobs it defines; it names each built job's source, and
    a job directory whose spec is not in it is judged by reading that spec. Raises
    `SpecError` when such a spec does not load (its job is kept) and `OutputRefused` with
    every reason the tree cannot be written."""
    known = dict(defined or {})
    sources = {name: path for path, names in known.items() for name in names}
    writes: dict[str, Mapping[str, str]] = {}
    removals: list[str] = []
    kept: dict[str, list[str]] = {}
    prunes: list[PlannedPrune] = []
    refusals: list[str] = []
    problems: list[LocatedProblem] = []
    foreign: list[str] = []
    unjudged: list[str] = []
    leftovers: list[str] = []
    built = {job.name for job in jobs}
    output = location.directory
    for job in sorted(jobs, key=lambda job: job.name):
        writes[job.name] = job.files
        if output is None:
            kept[job.name] = []
            continue
        job_removals, job_kept = _plan_built_job(output, job, sources.get(job.name), known,
                                                 refusals)
        removals.extend(f"{job.name}/{name}" for name in job_removals)
        kept[job.name] = job_kept
    for name, status in sorted(output.entries().items() if output is not None else []):
        assert output is not None
        shown_as = shown(output.path / name)
        if name.startswith(LEFTOVER_PREFIX):
            leftovers.append(shown_as)
        elif name == README_FILE:
            _judge_readme(output, status, refusals)
        elif name in built:
            continue
        elif not stat.S_ISDIR(status.st_mode):
            foreign.append(f"{shown_as}: {_what_it_is(status)} tfcompile did not write")
        elif not _plan_prune(output, name, known, prunes, removals, kept, refusals, problems):
            foreign.append(f"{shown_as}: a directory tfcompile did not write (its "
                           f"{KUSTOMIZATION_FILE} has no 'Generated by tfcompile' mark)")
        elif name not in kept:
            unjudged.append(name)
    if problems:
        raise SpecError(problems)
    if refusals:
        raise OutputRefused(refusals)
    pruned = {prune.job for prune in prunes}
    for job_name, names in sorted(kept.items()):
        why = ("left where a job directory is pruned" if job_name in pruned
               else f"its {KUSTOMIZATION_FILE} does not list it")
        foreign.extend(f"{shown(location.path / job_name / entry)}: not written by tfcompile "
                       f"({why})" for entry in names)
    readme = output.read(README_FILE) if output is not None else None
    top = {} if readme == README_TEXT else {README_FILE: README_TEXT}
    return Plan(location=location, writes=PlannedTexts(writes), removals=sorted(removals),
                prunes=prunes, kept=kept, foreign=sorted(foreign), unjudged=unjudged,
                leftovers=leftovers, top=top)


def _judge_readme(output: Directory, status: os.stat_result, refusals: list[str]) -> None:
    """Refuse a README.md at the top of the tree that tfcompile did not write: it writes one
    there (see `tree_readme`) and never overwrites what is not its."""
    shown_as = shown(output.path / README_FILE)
    if not stat.S_ISREG(status.st_mode):
        refusals.append(f"{shown_as}: is {_what_it_is(status)}; tfcompile writes its own "
                        f"{README_FILE} there (it keeps the output directory in git when no "
                        "job is left) and never follows or replaces it: move it away")
        return
    text = output.read(README_FILE)
    if text is None or not written_by_tfcompile(text):
        refusals.append(f"{shown_as}: was not written by tfcompile; tfcompile writes its own "
                        f"{README_FILE} there (it keeps the output directory in git when no "
                        "job is left, so Flux can prune the last job) and does not overwrite "
                        "this one: move it away")


def unified_diff(changes: Plan) -> str:
    """What a write would change, as a unified diff with paths under the output directory."""
    import difflib  # only `build --check` of a stale tree diffs

    chunks: list[str] = []
    for relative in changes.changed:
        old = changes.current(relative) or ""
        new = changes.new_text(relative) or ""
        shown_path = (changes.output / relative).as_posix()
        chunks.extend(
            difflib.unified_diff(
                old.splitlines(keepends=True),
                new.splitlines(keepends=True),
                fromfile=f"a/{shown_path}" if old else "/dev/null",
                tofile=f"b/{shown_path}" if changes.new_text(relative) is not None
                else "/dev/null",
            )
        )
    return "".join(chunk if chunk.endswith("\n") else chunk + "\n" for chunk in chunks)


__all__ = [
    "LEFTOVER_PREFIX",
    "Plan",
    "PlannedPrune",
    "PlannedTexts",
    "job_directory",
    "jobs_defined_in",
    "plan",
    "recorded_sources",
    "unified_diff",
]
