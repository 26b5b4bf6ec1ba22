"""The training script a job ships in a ConfigMap, read only from inside the job's repository.

`script:` is a path written by whoever edits `job.yaml`, and what it names is copied into a
ConfigMap (and printed by CI). So it must not reach anything else on the machine that runs
tfcompile: `/etc/hostname`, `../../.git/config` (where CI keeps its token), `/proc/self/environ`,
a device, or a symlink or hard link to any of them. The file must resolve, symlinks followed, to
a regular file inside the job's repository and outside every `.git`, with one hard link (a second
name for a file can be made anywhere on the same file system, `.git/config` included, and nothing
in the file says which name is the real one); its size is checked before it is read, and its name
must be a valid ConfigMap key. Each refusal is a problem at the `script:` value.

`script:` may also name a folder (a training package): every file under it is shipped, each under
the same rules, with a flat ConfigMap key per file (`/` becomes `__`, since a key holds no `/`)
and its relative path kept for the volume's `items`; folders may nest at most
`MAXIMUM_FOLDER_DEPTH` levels. Nothing is skipped: what cannot be shipped is refused, naming its
relative path (never its content).
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from .problems import Problem, UnreadableInput
from .shipped_script import KEY_SEPARATOR, Script, ScriptFile
from .shown_paths import display_path

MAXIMUM_SCRIPT_BYTES = 900 * 1024
"""A ConfigMap holds at most 1 MiB; leave room for the launcher and metadata."""

MAXIMUM_CONFIG_MAP_KEY = 253

MAXIMUM_FOLDER_DEPTH = 16
"""Folders a script folder may hold inside each other. A training package needs a few levels;
each level costs its ConfigMap key at least three of its 253 characters (`a__`), and the walk
stays far below Python's recursion limit."""
CONFIG_MAP_KEY = re.compile(r"[-._a-zA-Z0-9]+")
GIT_DIRECTORY = ".git"
WHERE = ("spec", "script")


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
    if os.path.isdir(real):
        return _read_directory(real, root, candidate)
    name = candidate.name
    problem = config_map_key_problem(name) if name else "must name a file or a folder"
    if problem is not None:
        return None, [Problem(WHERE, problem)]
    content, problems = _read_regular_file(real, candidate)
    if content is None:
        return None, problems
    return Script(files=(ScriptFile(key=name, path=name, text=content),)), []


def _relative_inside(real: Path, root: Path) -> Path | None:
    try:
        return real.relative_to(root)
    except ValueError:
        return None


def _read_regular_file(real: Path, given: Path,
                       shown_relative: str = "") -> tuple[str | None, list[Problem]]:
    """The UTF-8 text of the regular file `real`, or why not (`shown_relative`: its path in a
    script folder, named in the problem)."""
    shown = display_path(given)
    where = f"{shown_relative} " if shown_relative else ""
    try:
        before = os.lstat(real)
    except FileNotFoundError:
        return None, [Problem(WHERE, "no such file (the path is relative to the job file's "
                              "folder)")]
    except OSError as error:
        raise UnreadableInput("cannot read the script", shown, error) from None
    if not stat.S_ISREG(before.st_mode):
        return None, [Problem(WHERE, f"{where}is not a regular file (a folder, device, FIFO, "
                              "socket or broken symlink); give a file")]
    if before.st_nlink > 1:
        return None, [_hard_linked(where, before.st_nlink)]
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
            return None, [Problem(WHERE, f"{where}changed while it was read; run tfcompile "
                                  "again")]
        if opened.st_nlink > 1:
            return None, [_hard_linked(where, opened.st_nlink)]
        try:
            content = handle.read(MAXIMUM_SCRIPT_BYTES + 1)
        except OSError as error:
            raise UnreadableInput("cannot read the script", shown, error) from None
    if len(content) > MAXIMUM_SCRIPT_BYTES:
        return None, [_too_big(len(content))]
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError:
        return None, [Problem(WHERE, f"{where or 'the script '}is not UTF-8 text")]
    return text, []


def _hard_linked(where: str, links: int) -> Problem:
    return Problem(WHERE, f"{where or 'the script '}has {links} hard links: another name on "
                   "this machine is the same file (it could be .git/config or any file outside "
                   "the repository), so it is not shipped; allowed: a file with one link (copy "
                   "the file instead of linking it)")


def _too_big(size: int) -> Problem:
    return Problem(WHERE, f"the script is {size} bytes; a ConfigMap holds at most "
                   f"{MAXIMUM_SCRIPT_BYTES} here: ship it in the image instead")


@dataclass(frozen=True)
class _Found:
    """A regular file found under a script folder, before it is read."""

    relative: str
    real: Path
    given: Path
    size: int


def _read_directory(real: Path, root: Path, given: Path) -> tuple[Script | None, list[Problem]]:
    """Every file under the folder `real`, each under the rules of a single script, or every
    problem at once. Sizes are summed from `lstat` before anything is read."""
    found: list[_Found] = []
    problems: list[Problem] = []
    _walk(real, root, given, "", found, problems, depth=0)
    if not found and not problems:
        problems.append(Problem(WHERE, "names a folder that holds no files; give a folder with "
                                "the training code"))
    keys: dict[str, str] = {}
    for file in found:
        key = file.relative.replace("/", KEY_SEPARATOR)
        if config_map_key_problem(key) is not None:
            problems.append(Problem(WHERE, f"{file.relative}: the name (with '/' as "
                                    f"'{KEY_SEPARATOR}') is not a valid ConfigMap key: "
                                    "letters, digits, '-', '_' and '.', at most "
                                    f"{MAXIMUM_CONFIG_MAP_KEY} characters, not starting with "
                                    "'..'; rename it"))
        elif key in keys:
            problems.append(Problem(WHERE, f"{keys[key]} and {file.relative} would share the "
                                    f"ConfigMap key {key} ('/' becomes '{KEY_SEPARATOR}'); "
                                    "rename one"))
        else:
            keys[key] = file.relative
    if problems:
        return None, problems
    total = sum(file.size + len(file.relative.replace("/", KEY_SEPARATOR).encode())
                for file in found)
    if total > MAXIMUM_SCRIPT_BYTES:
        return None, [_folder_too_big(total, len(found))]
    files: list[ScriptFile] = []
    for file in found:
        text, read_problems = _read_regular_file(file.real, file.given, file.relative)
        if text is None:
            problems.extend(read_problems)
            continue
        files.append(ScriptFile(key=file.relative.replace("/", KEY_SEPARATOR),
                                path=file.relative, text=text))
    if problems:
        return None, problems
    total = sum(len(item.key.encode()) + len(item.text.encode()) for item in files)
    if total > MAXIMUM_SCRIPT_BYTES:
        return None, [_folder_too_big(total, len(files))]
    return Script(files=tuple(sorted(files, key=lambda item: item.key)), directory=True), []


def _walk(folder: Path, root: Path, given: Path, prefix: str, found: list[_Found],
          problems: list[Problem], depth: int) -> None:
    """Collect the regular files under `folder` (already inside `root`, `depth` folders below
    the script folder), refusing the rest."""
    try:
        names = sorted(os.listdir(folder))
    except OSError as error:
        raise UnreadableInput("cannot read the script folder", display_path(given),
                              error) from None
    for name in names:
        relative = f"{prefix}{name}"
        path, shown = folder / name, given / name
        if name.casefold() == GIT_DIRECTORY:
            problems.append(Problem(WHERE, f"{relative}: .git is never shipped; keep the "
                                    "training code in a folder without it"))
            continue
        try:
            status = os.lstat(path)
        except OSError as error:
            raise UnreadableInput("cannot read the script", display_path(shown), error) from None
        if stat.S_ISDIR(status.st_mode):
            if depth >= MAXIMUM_FOLDER_DEPTH:
                problems.append(Problem(WHERE, f"{relative}: a folder more than "
                                        f"{MAXIMUM_FOLDER_DEPTH} levels below the script "
                                        f"folder; allowed: folders at most "
                                        f"{MAXIMUM_FOLDER_DEPTH} levels deep"))
                continue
            _walk(path, root, shown, f"{relative}/", found, problems, depth + 1)
            continue
        target = path
        if stat.S_ISLNK(status.st_mode):
            target = Path(os.path.realpath(path))
            inside = _relative_inside(target, root)
            if inside is None or any(
                    part.casefold() == GIT_DIRECTORY for part in inside.parts):
                problems.append(Problem(WHERE, f"{relative}: a symlink out of the job's "
                                        "repository (or into .git); keep every file inside it"))
                continue
            try:
                status = os.stat(target)
            except OSError:
                problems.append(Problem(WHERE, f"{relative}: a broken symlink; remove it"))
                continue
            if stat.S_ISDIR(status.st_mode):
                problems.append(Problem(WHERE, f"{relative}: a symlink to a folder is not "
                                        "followed; put the files themselves in the folder"))
                continue
        if not stat.S_ISREG(status.st_mode):
            problems.append(Problem(WHERE, f"{relative}: not a regular file (a device, FIFO or "
                                    "socket); remove it from the folder"))
            continue
        if status.st_nlink > 1:
            problems.append(_hard_linked(f"{relative}: ", status.st_nlink))
            continue
        found.append(_Found(relative=relative, real=target, given=shown, size=status.st_size))


def _folder_too_big(total: int, count: int) -> Problem:
    return Problem(WHERE, f"the folder's {count} files and their keys are {total} bytes; a "
                   f"ConfigMap holds at most {MAXIMUM_SCRIPT_BYTES} here: ship the rest in the "
                   "image instead")


def directory_command_problem(script: Script, job_command_given: bool,
                              roles_without_command: list[str]) -> Problem | None:
    """A script folder has no single file to run: `command` must say which (the job's, or
    every role's own)."""
    if not script.directory or job_command_given or not roles_without_command:
        return None
    return Problem(WHERE, "names a folder, so there is no single file to run: set spec.command "
                   "to run its entrypoint, for example command: [python, "
                   "/opt/tfcompile/script/<entrypoint>.py] (or a command for role "
                   f"{', '.join(roles_without_command)})")
