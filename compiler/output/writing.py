"""Writing a plan into the output tree: staged next to each job directory, swapped in whole.

Writing happens under the tree's lock (`lock`), per job directory: the new directory is staged
next to it as `.tfcompile-new-<pid>-<job>` (files tfcompile does not own are carried over as hard
links) and swapped in with one atomic `renameat2(RENAME_EXCHANGE)`, so a reader always sees a job
directory whole, old or new, and `output/` itself is never replaced. Every job is staged before
the first swap, so a failure while writing (a full disk, a read-only tree) leaves the tree as it
was. Leftovers of a killed build (`.tfcompile-*` entries in the output directory) are removed by
the next build.

Everything is done by names inside directories opened without following a link (`location`,
`directory_handles`), never through a path again: a job directory swapped for a link (or
another directory) while a build runs is refused when it is opened, and when a swap moved out
something other than the directory the build staged from, the swap is undone and the build
refused.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass

from .directory_handles import Directory
from .directory_swap import exchange, move_into_place
from .errors import OutputEnvironmentError, OutputRefused, shown
from .generated_mark import KUSTOMIZATION_FILE
from .ownership import generated_directory
from .tree import LEFTOVER_PREFIX, Plan, job_directory

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
    with job_directory(changes.location, job) as current:
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
    top: list[tuple[str, str]] = []
    try:
        for name, text in sorted(changes.top.items()):
            top.append((_staging_name("new", name), name))
            output.write_new(top[-1][0], text, output.path / name)
        for job in changes.changed_jobs():
            staged.append(_stage(output, changes, job))
        for item in staged:
            try:
                _swap(output, item, changes.removals)
            except OSError as error:
                raise OutputEnvironmentError("replace", output.path / item.job, error) from None
        for staging, name in top:  # a file at the top: replaced whole, never followed
            try:
                output.replace(staging, output, name)
            except OSError as error:
                raise OutputEnvironmentError("replace", output.path / name, error) from None
    except BaseException:
        for item in reversed(staged):
            try:
                _undo(output, item)
            except OSError:
                continue  # the staged name may hold the old directory: the next build decides
            if item.staging is not None:
                _discard(output, item.staging, item.staged)
        for staging, _ in top:
            with contextlib.suppress(OSError):
                output.unlink(staging)
        raise
    for item in staged:
        _finish(output, item)
    return changed


__all__ = ["remove_leftovers", "write"]
