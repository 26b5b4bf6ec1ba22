"""The training script a job ships in a ConfigMap, read only from inside the job's repository.

`script:` is a path written by whoever edits `job.yaml`, and what it names is copied into a
ConfigMap (and printed by CI). So it must not reach anything else on the machine that runs
tfcompile: `/etc/hostname`, `../../.git/config` (where CI keeps its token), `/proc/self/environ`,
a device, or a symlink to any of them. The file must resolve, symlinks followed, to a regular file
inside the job's repository and outside every `.git`; its size is checked before it is read, and
its name must be a valid ConfigMap key. Each refusal is a problem at the `script:` value.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from .problems import Problem, UnreadableInput, display_path

MAXIMUM_SCRIPT_BYTES = 900 * 1024
"""A ConfigMap holds at most 1 MiB; leave room for the launcher and metadata."""

MAXIMUM_CONFIG_MAP_KEY = 253
CONFIG_MAP_KEY = re.compile(r"[-._a-zA-Z0-9]+")
GIT_DIRECTORY = ".git"
WHERE = ("spec", "script")


@dataclass(frozen=True)
class Script:
    """The training script shipped in a ConfigMap."""

    file_name: str
    text: str


def repository_root(job_file: Path) -> Path:
    """The repository that holds a job: the nearest folder, from the job file's own folder
    upwards, that has a `.git` (a directory, or a file in a worktree or submodule); without one,
    the job file's own folder."""
    folder = Path(os.path.realpath(job_file.parent if job_file.parent != Path("") else "."))
    for candidate in (folder, *folder.parents):
        if os.path.lexists(candidate / GIT_DIRECTORY):
            return candidate
    return folder


def config_map_key_problem(name: str) -> str | None:
    """Why `name` cannot be a ConfigMap key (Kubernetes' IsConfigMapKey), or None."""
    if len(name) > MAXIMUM_CONFIG_MAP_KEY or not CONFIG_MAP_KEY.fullmatch(name) or (
        name.startswith("..") or name == "."
    ):
        return (
            "the file name is not a valid ConfigMap key: letters, digits, '-', '_' and '.', "
            f"at most {MAXIMUM_CONFIG_MAP_KEY} characters, not '.' and not starting with '..'; "
            "rename the file"
        )
    return None


def read_script(written: str, job_file: Path, shown_job: str) -> tuple[Script | None,
                                                                      list[Problem]]:
    """The script `written` in the `script:` field of `job_file`, or the problems that keep it
    from being shipped. Raises `UnreadableInput` when a permitted file cannot be read."""
    if os.path.isabs(written):
        return None, [Problem(WHERE, "must be a path relative to the job file's folder (an "
                              "absolute path is refused): the script must be inside the job's "
                              "repository")]
    candidate = job_file.parent / written
    name = candidate.name
    problem = config_map_key_problem(name) if name else "must name a file, not a folder"
    if problem is not None:
        return None, [Problem(WHERE, problem)]
    root = repository_root(job_file)
    real = Path(os.path.realpath(candidate))
    inside = _relative_inside(real, root)
    if inside is None:
        return None, [Problem(WHERE, "leads outside the job's repository (the nearest folder "
                              "with .git above the job file, else the job file's folder); "
                              "keep the script inside it, and no symlink out of it")]
    if any(part.casefold() == GIT_DIRECTORY for part in inside.parts):
        return None, [Problem(WHERE, "is inside .git, which is never shipped; give a script "
                              "of the working tree")]
    return _read_regular_file(real, candidate, name)


def _relative_inside(real: Path, root: Path) -> Path | None:
    try:
        return real.relative_to(root)
    except ValueError:
        return None


def _read_regular_file(real: Path, given: Path, name: str) -> tuple[Script | None,
                                                                    list[Problem]]:
    shown = display_path(given)
    try:
        before = os.lstat(real)
    except FileNotFoundError:
        return None, [Problem(WHERE, "no such file (the path is relative to the job file's "
                              "folder)")]
    except OSError as error:
        raise UnreadableInput("cannot read the script", shown, error) from None
    if not stat.S_ISREG(before.st_mode):
        return None, [Problem(WHERE, "is not a regular file (a folder, device, FIFO, socket or "
                              "broken symlink); give a file")]
    if before.st_size > MAXIMUM_SCRIPT_BYTES:
        return None, [_too_big(before.st_size)]
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        descriptor = os.open(real, flags)
    except OSError as error:
        raise UnreadableInput("cannot read the script", shown, error) from None
    with os.fdopen(descriptor, "rb") as handle:
        opened = os.fstat(handle.fileno())
        if (opened.st_dev, opened.st_ino) != (before.st_dev, before.st_ino) or not (
            stat.S_ISREG(opened.st_mode)
        ):
            return None, [Problem(WHERE, "changed while it was read; run tfcompile again")]
        try:
            content = handle.read(MAXIMUM_SCRIPT_BYTES + 1)
        except OSError as error:
            raise UnreadableInput("cannot read the script", shown, error) from None
    if len(content) > MAXIMUM_SCRIPT_BYTES:
        return None, [_too_big(len(content))]
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError:
        return None, [Problem(WHERE, "the script is not UTF-8 text")]
    return Script(file_name=name, text=text), []


def _too_big(size: int) -> Problem:
    return Problem(WHERE, f"the script is {size} bytes; a ConfigMap holds at most "
                   f"{MAXIMUM_SCRIPT_BYTES} here: ship it in the image instead")
