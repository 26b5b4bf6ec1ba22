"""The output directory: what a build would change, a diff of it, and a safe write.

The plan is computed from the specs and the tree as it is: every job built gets its files; a
job directory not built is pruned only when the spec it records no longer defines it. tfcompile
touches only its own files (see `output_ownership`): a file it would replace but did not write,
a directory it did not generate, or a symbolic link where it would write or delete stops the
build before anything is written.

Writing happens under the tree's lock (`output_lock`), per job directory: the new directory is
staged next to it as `.tfcompile-new-<pid>-<job>` (files tfcompile does not own are carried over
as hard links) and swapped in with one atomic `renameat2(RENAME_EXCHANGE)`, so a reader always
sees a job directory whole, old or new, and `output/` itself is never replaced. Every job is
staged before the first swap, so a failure while writing (a full disk, a read-only tree) leaves
the tree as it was. Leftovers of a killed build (`.tfcompile-*` entries in the output directory)
are removed by the next build.

Nothing outside the output directory is written, moved, changed or deleted: the plan reads and
the write works in the directories `output_location` and `directory_handles` opened without
following a link, by names inside them, never through a path again. A job directory swapped
for a link (or another directory) while a build runs is refused when it is opened, and when a
swap moved out something other than the directory the build staged from, the swap is undone
and the build refused.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import stat
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from .compile import KUSTOMIZATION_FILE, CompiledJob
from .directory_handles import Directory
from .directory_swap import exchange, move_into_place
from .generated_mark import recorded_source
from .output_errors import OutputEnvironmentError, OutputRefused, shown
from .output_location import OutputLocation
from .output_ownership import (
    JobDirectory,
    generated_directory,
    jobs_defined_in,
    source_path,
    still_defines,
)

LEFTOVER_PREFIX = ".tfcompile-"
"""Names tfcompile stages under inside the output directory; reserved, removed by every build."""


@dataclass(frozen=True)
class Prune:
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
    prunes: list[Prune] = field(default_factory=list)
    kept: dict[str, list[str]] = field(default_factory=dict)

    @property
    def output(self) -> Path:
        """The output directory as the user named it."""
        return self.location.path

    def current(self, relative: str) -> str | None:
        """The text at `relative` (`job/file`) in the output directory now, if any."""
        job, _, name = relative.partition("/")
        with _job_directory(self.location, job) as directory:
            return directory.read(name) if directory is not None else None

    @cached_property
    def changed(self) -> list[str]:
        """Paths whose content would change, sorted (read once)."""
        paths: list[str] = []
        for job, files in self.writes.jobs.items():
            with _job_directory(self.location, job) as directory:
                paths.extend(f"{job}/{name}" for name, text in files.items()
                             if (directory.read(name) if directory else None) != text)
        return sorted([*paths, *self.removals])

    def changed_jobs(self) -> list[str]:
        return sorted({path.split("/", 1)[0] for path in self.changed})


@contextlib.contextmanager
def _job_directory(location: OutputLocation, job: str) -> Iterator[Directory | None]:
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
                    defined: Mapping[Path, frozenset[str]], refusals: list[str]
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


def _plan_prune(output: Directory, name: str, defined: Mapping[Path, frozenset[str]],
                prunes: list[Prune], removals: list[str], kept: dict[str, list[str]],
                refusals: list[str]) -> None:
    """Prune the directory `name` (not built) when tfcompile generated it from a spec that no
    longer defines it."""
    try:
        directory = output.open(name)
    except OutputRefused:
        return  # no longer a directory: not tfcompile's to prune
    if directory is None:
        return
    with directory:
        generated = generated_directory(directory)
        if generated is None:
            return
        holds, reason = still_defines(generated, defined)
        if holds is not False:
            return
        inside = directory.entries()
    links = sorted(f for f in generated.files if f in inside and _is_link(inside[f]))
    if links:
        refusals.append(f"{shown(directory.path)}: {', '.join(links)}: symbolic link where "
                        "tfcompile would delete; it never follows links in the output "
                        "tree, remove it")
        return
    prunes.append(Prune(name, reason))
    removals.extend(f"{name}/{f}" for f in generated.files
                    if f in inside and stat.S_ISREG(inside[f].st_mode))
    kept[name] = sorted(f for f in inside if f not in generated.files)


def plan(location: OutputLocation, jobs: Iterable[CompiledJob],
         defined: Mapping[Path, frozenset[str]] | None = None) -> Plan:
    """The tree `jobs` need, and the job directories whose spec no longer defines them.

    `location` is the output directory as `output_lock.locked` gives it. `defined` maps each
    spec file read (resolved) to the jobs it defines; it names each built job's source, and
    a job directory whose spec is not in it is judged by reading that spec. Raises
    `OutputRefused` with every reason the tree cannot be written."""
    defined = defined or {}
    sources = {name: path for path, names in defined.items() for name in names}
    writes: dict[str, Mapping[str, str]] = {}
    removals: list[str] = []
    kept: dict[str, list[str]] = {}
    prunes: list[Prune] = []
    refusals: list[str] = []
    built = {job.name for job in jobs}
    output = location.directory
    for job in sorted(jobs, key=lambda job: job.name):
        writes[job.name] = job.files
        if output is None:
            kept[job.name] = []
            continue
        job_removals, job_kept = _plan_built_job(output, job, sources.get(job.name), defined,
                                                 refusals)
        removals.extend(f"{job.name}/{name}" for name in job_removals)
        kept[job.name] = job_kept
    for name, status in sorted(output.entries().items() if output is not None else []):
        if name in built or name.startswith(LEFTOVER_PREFIX) or not stat.S_ISDIR(status.st_mode):
            continue
        assert output is not None
        _plan_prune(output, name, defined, prunes, removals, kept, refusals)
    if refusals:
        raise OutputRefused(refusals)
    return Plan(location=location, writes=PlannedTexts(writes), removals=sorted(removals),
                prunes=prunes, kept=kept)


def unified_diff(changes: Plan) -> str:
    """What a write would change, as a unified diff with paths under the output directory."""
    import difflib  # only `build --check` of a stale tree diffs

    chunks: list[str] = []
    for relative in changes.changed:
        old = changes.current(relative) or ""
        new = changes.writes.get(relative, "")
        shown_path = (changes.output / relative).as_posix()
        chunks.extend(
            difflib.unified_diff(
                old.splitlines(keepends=True),
                new.splitlines(keepends=True),
                fromfile=f"a/{shown_path}" if old else "/dev/null",
                tofile=f"b/{shown_path}" if relative in changes.writes else "/dev/null",
            )
        )
    return "".join(chunk if chunk.endswith("\n") else chunk + "\n" for chunk in chunks)


_SPARE_NAMES = (f"{LEFTOVER_PREFIX}gone-{os.getpid()}-{os.urandom(4).hex()}-{number}"
                for number in itertools.count())
"""Names a directory being removed moves its subdirectories to (`Directory.remove_tree`)."""


def _spare_names() -> Iterator[str]:
    return _SPARE_NAMES


@dataclass
class _Staged:
    job: str
    staging: str | None
    """The name of the staged directory in the output directory (None: the job goes)."""
    staged: tuple[int, int] | None
    """The staged directory's identity (device, inode)."""
    original: tuple[int, int] | None
    """The identity of the job directory it replaces (None when there was none)."""
    files: list[str]
    """The names of the files written."""
    kept: list[str]
    done: str = ""
    old: str | None = None
    """Where the replaced directory is, by name in the output directory."""


def _staging_name(kind: str, job: str) -> str:
    return f"{LEFTOVER_PREFIX}{kind}-{os.getpid()}-{job}"


def _stage(output: Directory, changes: Plan, job: str) -> _Staged:
    files = changes.writes.jobs.get(job, {})
    kept = changes.kept.get(job, [])
    with _job_directory(changes.location, job) as current:
        original = current.identity() if current is not None else None
        if not files and not kept:
            return _Staged(job, None, None, original, [], kept)
        staging = _staging_name("new", job)
        try:
            new = output.make(staging)
        except OSError as error:
            raise OutputEnvironmentError("write", output.path / job, error) from None
        with new:
            staged = new.identity()
            try:
                for name, text in files.items():
                    new.write_new(name, text, output.path / job / name)
                for name in kept:
                    try:
                        if current is None:
                            raise FileNotFoundError(2, "No such file or directory")
                        current.copy_entry(name, new)
                    except OSError as error:
                        raise OutputEnvironmentError("keep", output.path / job / name,
                                                     error) from None
                if current is not None:  # the swapped-in directory keeps the old one's mode
                    new.set_mode(stat.S_IMODE(os.fstat(current.descriptor).st_mode))
            except BaseException:
                _discard(output, staging, staged)
                raise
    return _Staged(job, staging, staged, original, list(files), kept)


def _identity(output: Directory, name: str) -> tuple[int, int] | None:
    """The identity of the directory `name` (None when it is not a directory)."""
    status = output.status(name)
    if status is None or not stat.S_ISDIR(status.st_mode):
        return None
    return status.st_dev, status.st_ino


def _refuse_swapped(output: Directory, item: _Staged) -> OutputRefused:
    return OutputRefused([f"{shown(output.path / item.job)}: was replaced (by a symbolic link "
                          "or another directory) while tfcompile was writing it; it was put "
                          "back, build again"])


def _replace_file_by_file(output: Directory, item: _Staged, removals: list[str]) -> None:
    """Where directories cannot be swapped: each file replaced atomically, resources first and
    the kustomization last, so it never lists a file that is not there."""
    assert item.staging is not None
    staging = output.open(item.staging)
    directory = output.open(item.job)
    try:
        if staging is None or directory is None or directory.identity() != item.original:
            raise _refuse_swapped(output, item)
        order = sorted(item.files, key=lambda name: name == KUSTOMIZATION_FILE)
        for name in order:
            staging.replace(name, directory, name)
        for relative in removals:
            directory.unlink(relative.split("/", 1)[1])
    finally:
        for opened in (staging, directory):
            if opened is not None:
                opened.close()
    item.old = item.staging


def _swap(output: Directory, item: _Staged, removals: list[str]) -> None:
    if item.staging is None:
        item.old = _staging_name("old", item.job)
        move_into_place(output.descriptor, item.job, item.old)
        item.done = "removed"
    elif output.status(item.job) is None:
        move_into_place(output.descriptor, item.staging, item.job)
        item.done = "created"
        return
    elif exchange(output.descriptor, item.staging, item.job):
        item.old = item.staging
        item.done = "exchanged"
    else:
        _replace_file_by_file(output, item, [r for r in removals if r.startswith(f"{item.job}/")])
        item.done = "replaced"
        return
    if _identity(output, item.old) != item.original:
        # What was moved out is not the directory the plan read: put it back, write nothing.
        _undo(output, item)
        item.done = ""
        raise _refuse_swapped(output, item)


def _undo(output: Directory, item: _Staged) -> None:
    if item.done == "removed" and item.old is not None:
        move_into_place(output.descriptor, item.old, item.job)
    elif item.done == "created" and item.staging is not None:
        move_into_place(output.descriptor, item.job, item.staging)
    elif item.done == "exchanged" and item.staging is not None:
        exchange(output.descriptor, item.staging, item.job)


def _discard(output: Directory, name: str, identity: tuple[int, int] | None) -> None:
    """Remove a staged directory, if `name` still is the one staged."""
    if identity is not None and _identity(output, name) == identity:
        with contextlib.suppress(OSError, OutputRefused, OutputEnvironmentError):
            output.remove_tree(name, _spare_names())


def _finish(output: Directory, item: _Staged) -> None:
    """Remove the old directory; anything someone added to it meanwhile moves to the new one."""
    if item.old is None or _identity(output, item.old) is None:
        return
    with contextlib.suppress(OSError, OutputRefused, OutputEnvironmentError):
        if item.done == "exchanged":
            old, new = output.open(item.old), output.open(item.job)
            try:
                if old is not None and new is not None:
                    expected = set(item.files) | set(item.kept)
                    generated = generated_directory(old)
                    expected |= set(generated.files if generated else [])
                    present = new.entries()
                    for name in old.entries():
                        if name not in expected and name not in present:
                            old.rename(name, new, name)
            finally:
                for opened in (old, new):
                    if opened is not None:
                        opened.close()
        output.remove_tree(item.old, _spare_names())


def remove_leftovers(output: Directory) -> None:
    """Remove what a killed build left in the output directory (call under the lock)."""
    for name in output.entries():
        if not name.startswith(LEFTOVER_PREFIX):
            continue
        try:
            output.remove_tree(name, _spare_names())
        except OSError as error:
            raise OutputEnvironmentError("remove", output.path / name, error) from None


def write(changes: Plan) -> list[str]:
    """Apply the plan (under the tree's lock); returns the changed paths."""
    if changes.location.directory is not None:
        remove_leftovers(changes.location.directory)
    changed = changes.changed
    if not changed:
        return []
    output = changes.location.create()
    staged: list[_Staged] = []
    try:
        for job in changes.changed_jobs():
            staged.append(_stage(output, changes, job))
        for item in staged:
            try:
                _swap(output, item, changes.removals)
            except OSError as error:
                raise OutputEnvironmentError("replace", output.path / item.job, error) from None
    except BaseException:
        for item in reversed(staged):
            try:
                _undo(output, item)
            except OSError:
                continue  # the staged name may hold the old directory: the next build decides
            if item.staging is not None:
                _discard(output, item.staging, item.staged)
        raise
    for item in staged:
        _finish(output, item)
    return changed


__all__ = ["LEFTOVER_PREFIX", "Plan", "PlannedTexts", "Prune", "jobs_defined_in", "plan",
           "remove_leftovers", "unified_diff", "write"]
