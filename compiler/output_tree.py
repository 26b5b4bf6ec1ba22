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
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from .compile import KUSTOMIZATION_FILE, CompiledJob
from .directory_swap import exchange, move_into_place
from .generated_mark import recorded_source
from .output_errors import OutputEnvironmentError, OutputRefused, shown
from .output_ownership import (
    JobDirectory,
    entries,
    generated_directory,
    jobs_defined_in,
    read_regular,
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

    output: Path
    writes: PlannedTexts
    removals: list[str]
    prunes: list[Prune] = field(default_factory=list)
    kept: dict[str, list[str]] = field(default_factory=dict)

    @cached_property
    def changed(self) -> list[str]:
        """Paths whose content would change, sorted (read once)."""
        paths = [p for p, text in self.writes.items() if _read(self.output / p) != text]
        return sorted([*paths, *self.removals])

    def changed_jobs(self) -> list[str]:
        return sorted({path.split("/", 1)[0] for path in self.changed})


def _read(path: Path) -> str | None:
    return read_regular(path)


def _is_link(status: os.stat_result) -> bool:
    return stat.S_ISLNK(status.st_mode)


def _plan_built_job(output: Path, job: CompiledJob, source: Path | None,
                    defined: Mapping[Path, frozenset[str]], refusals: list[str]
                    ) -> tuple[list[str], list[str]]:
    """Check that `job` may be written; its removals and the entries kept."""
    directory = output / job.name
    try:
        status = os.lstat(directory)
    except FileNotFoundError:
        return [], []
    except OSError as error:
        raise OutputEnvironmentError("read", directory, error) from None
    if _is_link(status):
        refusals.append(f"{shown(directory)}: is a symbolic link; tfcompile never follows links "
                        "in the output tree: remove it, or give the job another name")
        return [], []
    if not stat.S_ISDIR(status.st_mode):
        refusals.append(f"{shown(directory)}: is a file tfcompile did not write; move it away, "
                        "or give the job another name")
        return [], []
    present = entries(directory)
    generated = _as_compiled(directory, job) or generated_directory(directory)
    if generated is None:
        if present:
            refusals.append(
                f"{shown(directory)}: exists and was not written by tfcompile (its "
                f"{KUSTOMIZATION_FILE} has no 'Generated by tfcompile' mark); tfcompile does "
                "not overwrite it: move it away, or give the job another name")
        return [], sorted(present)
    recorded = source_path(generated)
    if (source is not None and recorded is not None and os.path.lexists(recorded)
            and recorded.resolve() != source.resolve()):
        holds, display = still_defines(generated, defined)
        if holds:
            refusals.append(
                f"{shown(directory)}: was compiled from {display}, which still defines job "
                f"{job.name}; two specs name job {job.name} (the name is its output "
                "directory): rename one, or delete it")
    owned = set(generated.files)
    foreign = sorted(name for name in job.files if name in present and name not in owned)
    if foreign:
        refusals.append(
            f"{shown(directory)}: holds {', '.join(foreign)}, which tfcompile would write but "
            f"did not write (not listed in its {KUSTOMIZATION_FILE}); move "
            f"{'them' if len(foreign) > 1 else 'it'} away, nothing was overwritten")
    links = sorted(name for name in owned | set(job.files)
                   if name in present and _is_link(present[name]))
    if links:
        refusals.append(f"{shown(directory)}: {', '.join(links)}: symbolic link where tfcompile "
                        "writes; it never follows links in the output tree, remove it")
    removals = sorted(name for name in owned if name not in job.files and name in present
                      and stat.S_ISREG(present[name].st_mode))
    kept = sorted(name for name in present if name not in owned and name not in job.files)
    return removals, kept


def _as_compiled(directory: Path, job: CompiledJob) -> JobDirectory | None:
    """The job directory as `generated_directory` reads it, without parsing, when its
    kustomization is byte for byte the one `job` compiles to (it lists the job's other files)."""
    text = _read(directory / KUSTOMIZATION_FILE)
    if text is None or text != job.files.get(KUSTOMIZATION_FILE):
        return None
    resources = [name for name in job.files if name != KUSTOMIZATION_FILE]
    return JobDirectory(directory, [KUSTOMIZATION_FILE, *resources],
                        recorded_source(text.split("\n", 1)[0]))


def plan(output: Path, jobs: Iterable[CompiledJob],
         defined: Mapping[Path, frozenset[str]] | None = None) -> Plan:
    """The tree `jobs` need, and the job directories whose spec no longer defines them.

    `defined` maps each spec file read (resolved) to the jobs it defines; it names each built
    job's source. Raises `OutputRefused` with every reason the tree cannot be written."""
    defined = defined or {}
    sources = {name: path for path, names in defined.items() for name in names}
    writes: dict[str, Mapping[str, str]] = {}
    removals: list[str] = []
    kept: dict[str, list[str]] = {}
    prunes: list[Prune] = []
    refusals: list[str] = []
    built = {job.name for job in jobs}
    for job in sorted(jobs, key=lambda job: job.name):
        writes[job.name] = job.files
        job_removals, job_kept = _plan_built_job(output, job, sources.get(job.name), defined,
                                                 refusals)
        removals.extend(f"{job.name}/{name}" for name in job_removals)
        kept[job.name] = job_kept
    present = entries(output) if os.path.isdir(output) and not os.path.islink(output) else {}
    for name, status in sorted(present.items()):
        if name in built or name.startswith(LEFTOVER_PREFIX) or not stat.S_ISDIR(status.st_mode):
            continue
        directory = output / name
        generated = generated_directory(directory)
        if generated is None:
            continue
        holds, reason = still_defines(generated, defined)
        if holds is not False:
            continue
        inside = entries(directory)
        links = sorted(f for f in generated.files if f in inside and _is_link(inside[f]))
        if links:
            refusals.append(f"{shown(directory)}: {', '.join(links)}: symbolic link where "
                            "tfcompile would delete; it never follows links in the output "
                            "tree, remove it")
            continue
        prunes.append(Prune(name, reason))
        removals.extend(f"{name}/{f}" for f in generated.files
                        if f in inside and stat.S_ISREG(inside[f].st_mode))
        kept[name] = sorted(f for f in inside if f not in generated.files)
    if refusals:
        raise OutputRefused(refusals)
    return Plan(output=output, writes=PlannedTexts(writes), removals=sorted(removals),
                prunes=prunes, kept=kept)


def unified_diff(changes: Plan) -> str:
    """What a write would change, as a unified diff with paths under the output directory."""
    import difflib  # only `build --check` of a stale tree diffs

    chunks: list[str] = []
    for relative in changes.changed:
        old = _read(changes.output / relative) or ""
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


def _write_file(path: Path, text: str, shown_as: Path) -> None:
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                             | os.O_CLOEXEC, 0o666)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(text.encode("utf-8"))
    except OSError as error:
        raise OutputEnvironmentError("write", shown_as, error) from None


def _carry_over(source: Path, target: Path) -> None:
    """Put an entry tfcompile keeps into the staged directory without copying or following it:
    files as hard links, links as links, directories entry by entry."""
    status = os.lstat(source)
    if stat.S_ISLNK(status.st_mode):
        os.symlink(os.readlink(source), target)
    elif stat.S_ISDIR(status.st_mode):
        os.mkdir(target, stat.S_IMODE(status.st_mode))
        for name in sorted(os.listdir(source)):
            _carry_over(source / name, target / name)
    elif stat.S_ISREG(status.st_mode):
        try:
            os.link(source, target, follow_symlinks=False)
        except OSError:
            shutil.copy2(source, target, follow_symlinks=False)
    else:
        raise OutputRefused([f"{shown(source)}: not a file, directory or link; tfcompile "
                             "cannot keep it while replacing the job directory, move it away"])


@dataclass
class _Staged:
    job: str
    directory: Path
    staging: Path | None
    files: list[str]
    """The names of the files written."""
    kept: list[str]
    done: str = ""
    old: Path | None = None


def _staging_name(output: Path, kind: str, job: str) -> Path:
    return output / f"{LEFTOVER_PREFIX}{kind}-{os.getpid()}-{job}"


def _stage(output: Path, changes: Plan, job: str) -> _Staged:
    files = changes.writes.jobs.get(job, {})
    kept = changes.kept.get(job, [])
    directory = output / job
    if not files and not kept:
        return _Staged(job, directory, None, [], kept)
    staging = _staging_name(output, "new", job)
    try:
        os.mkdir(staging)
    except OSError as error:
        raise OutputEnvironmentError("write", directory, error) from None
    try:
        for name, text in files.items():
            _write_file(staging / name, text, directory / name)
        for name in kept:
            try:
                _carry_over(directory / name, staging / name)
            except OSError as error:
                raise OutputEnvironmentError("keep", directory / name, error) from None
        if os.path.isdir(directory):  # the swapped-in directory keeps the old one's mode
            os.chmod(staging, stat.S_IMODE(os.lstat(directory).st_mode))
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return _Staged(job, directory, staging, list(files), kept)


def _replace_file_by_file(item: _Staged, removals: list[str]) -> None:
    """Where directories cannot be swapped: each file replaced atomically, resources first and
    the kustomization last, so it never lists a file that is not there."""
    assert item.staging is not None
    order = sorted(item.files, key=lambda name: name == KUSTOMIZATION_FILE)
    for name in order:
        os.replace(item.staging / name, item.directory / name)
    for relative in removals:
        (item.directory / relative.split("/", 1)[1]).unlink()
    item.old = item.staging


def _swap(output: Path, item: _Staged, removals: list[str]) -> None:
    if item.staging is None:
        item.old = _staging_name(output, "old", item.job)
        os.rename(item.directory, item.old)
        item.done = "removed"
    elif not os.path.lexists(item.directory):
        move_into_place(item.staging, item.directory)
        item.done = "created"
    elif exchange(item.staging, item.directory):
        item.old = item.staging
        item.done = "exchanged"
    else:
        _replace_file_by_file(item, [r for r in removals if r.startswith(f"{item.job}/")])
        item.done = "replaced"


def _undo(item: _Staged) -> None:
    if item.done == "removed" and item.old is not None:
        os.rename(item.old, item.directory)
    elif item.done == "created" and item.staging is not None:
        os.rename(item.directory, item.staging)
    elif item.done == "exchanged" and item.staging is not None:
        exchange(item.staging, item.directory)


def _finish(item: _Staged) -> None:
    """Remove the old directory; anything someone added to it meanwhile moves to the new one."""
    if item.old is None or not os.path.isdir(item.old):
        return
    if item.done == "exchanged":
        expected = set(item.files) | set(item.kept)
        generated = generated_directory(item.old)
        expected |= set(generated.files if generated else [])
        for name in os.listdir(item.old):
            if name not in expected and not os.path.lexists(item.directory / name):
                os.rename(item.old / name, item.directory / name)
    _remove_tree(item.old, ignore_errors=True)


def _remove_tree(path: Path, ignore_errors: bool = False) -> None:
    """Remove a staged or replaced directory (it may carry a read-only mode of the job's)."""
    with contextlib.suppress(OSError):
        os.chmod(path, 0o700)
    shutil.rmtree(path, ignore_errors=ignore_errors)


def remove_leftovers(output: Path) -> None:
    """Remove what a killed build left in the output directory (call under the lock)."""
    if not os.path.isdir(output) or os.path.islink(output):
        return
    for name, status in entries(output).items():
        if not name.startswith(LEFTOVER_PREFIX):
            continue
        path = output / name
        try:
            if stat.S_ISDIR(status.st_mode):
                _remove_tree(path)
            else:
                path.unlink()
        except OSError as error:
            raise OutputEnvironmentError("remove", path, error) from None


def write(changes: Plan) -> list[str]:
    """Apply the plan (under the tree's lock); returns the changed paths."""
    output = changes.output
    remove_leftovers(output)
    changed = changes.changed
    if not changed:
        return []
    try:
        output.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise OutputEnvironmentError("create", output, error) from None
    staged: list[_Staged] = []
    try:
        for job in changes.changed_jobs():
            staged.append(_stage(output, changes, job))
        for item in staged:
            try:
                _swap(output, item, changes.removals)
            except OSError as error:
                raise OutputEnvironmentError("replace", item.directory, error) from None
    except BaseException:
        for item in reversed(staged):
            try:
                _undo(item)
            except OSError:
                continue  # the staged name may hold the old directory: the next build decides
            if item.staging is not None:
                shutil.rmtree(item.staging, ignore_errors=True)
        raise
    for item in staged:
        _finish(item)
    return changed


__all__ = ["LEFTOVER_PREFIX", "Plan", "PlannedTexts", "Prune", "jobs_defined_in", "plan",
           "remove_leftovers", "unified_diff", "write"]
