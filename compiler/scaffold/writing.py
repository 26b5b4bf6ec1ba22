"""`init`'s files written into DIR without following a symbolic link, or not at all.

`tfcompile init DIR` is often run in a folder that already holds something: a clone, a folder
someone else prepared. A symbolic link there (`jobs -> /etc`, `ci/check.sh -> ~/.bashrc`, a
dangling `.gitlab-ci.yml -> /tmp/x`) would make a plain write create or change a file outside
DIR. So, before anything is written, every path init writes is looked at without following a
link: the folders on the way to DIR (from the working directory, or from `/` when DIR is
absolute, as `build` walks its output directory), DIR, each folder under it and each file, the
output directory and the example's job directory (with what it holds) that init's build writes.
Every link found, dangling or not, is refused by its path, with every file that exists already,
all at once, and nothing is written (`refusals`).

Then each folder is created and opened relative to the one before it with O_NOFOLLOW (`mkdir`
and `open` at a directory descriptor), and each file created with O_CREAT|O_EXCL|O_NOFOLLOW
there (`write`): a link put in place between the look and the write is not followed either;
init then stops and removes what it wrote, and says which path it met.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath

_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
EXECUTABLE_MODE = 0o755


class WriteRefused(Exception):
    """Paths init will not write through or over; nothing was written (or what was, removed)."""

    def __init__(self, reasons: Iterable[str]) -> None:
        self.reasons = list(reasons)
        super().__init__("; ".join(self.reasons))


def _link(shown: Path) -> str:
    return (f"{shown}: is a symbolic link; init writes nothing through a link (dangling or "
            "not): remove it, or give init another folder")


def _not_a_folder(shown: Path) -> str:
    return f"{shown}: is a file where init needs a folder; move it away"


def _start(directory: Path) -> tuple[int, list[str]]:
    """A descriptor of where `directory` is walked from, and the names to walk."""
    absolute = directory.is_absolute()
    descriptor = os.open("/" if absolute else ".", _FOLDER_FLAGS)
    return descriptor, [part for part in directory.parts[1 if absolute else 0:] if part != "."]


def _kind(parent: int, name: str) -> int | None:
    """The file type of `name` in `parent` as lstat sees it; None when it is missing."""
    try:
        return stat.S_IFMT(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        return None


def _walk_to(directory: Path, reasons: list[str]) -> int | None:
    """`directory` opened without following a link; None when it is missing (then nothing in
    it exists) or a link or file is on the way (added to `reasons`)."""
    current, names = _start(directory)
    shown = Path(directory.anchor)
    try:
        for name in names:
            shown /= name
            kind = _kind(current, name)
            if kind is None:
                return None
            if kind == stat.S_IFLNK:
                reasons.append(_link(shown))
                return None
            if kind != stat.S_IFDIR:
                reasons.append(_not_a_folder(shown))
                return None
            following = os.open(name, _FOLDER_FLAGS, dir_fd=current)
            os.close(current)
            current = following
    except BaseException:
        os.close(current)
        raise
    return current


def _parent(path: str) -> str:
    """The folder of a relative, `/`-separated path ("" for the top)."""
    parent = str(PurePosixPath(path).parent)
    return "" if parent == "." else parent


def _folders(files: Iterable[str], folders: Iterable[str]) -> list[str]:
    """Every folder on the way to `files`, and `folders` with theirs, parents first."""
    found: set[str] = set()
    for path in [*(_parent(file) for file in files), *folders]:
        while path:
            found.add(path)
            path = _parent(path)
    return sorted(found, key=lambda folder: (folder.count("/"), folder))


def refusals(directory: Path, files: Iterable[str], folders: Iterable[str] = (),
             written_folders: Iterable[str] = ()) -> list[str]:
    """Why init may not write `files` (relative to `directory`) and the files a build writes
    into `folders`: every symbolic link on the way or in place, every file where a folder is
    needed, and the files that exist already. `written_folders` (among `folders`) are folders
    whose every entry a build may write: a link in them is refused too."""
    files = list(files)
    reasons: list[str] = []
    root = _walk_to(directory, reasons)
    if root is None:
        return reasons
    opened = {"": root}
    existing: list[str] = []
    try:
        for folder in _folders(files, folders):
            parent = opened.get(_parent(folder))
            if parent is None:
                continue
            name = PurePosixPath(folder).name
            kind = _kind(parent, name)
            if kind == stat.S_IFLNK:
                reasons.append(_link(directory / folder))
            elif kind is not None and kind != stat.S_IFDIR:
                reasons.append(_not_a_folder(directory / folder))
            elif kind is not None:
                opened[folder] = os.open(name, _FOLDER_FLAGS, dir_fd=parent)
        for path in files:
            parent = opened.get(_parent(path))
            if parent is None:
                continue
            kind = _kind(parent, PurePosixPath(path).name)
            if kind == stat.S_IFLNK:
                reasons.append(_link(directory / path))
            elif kind is not None:
                existing.append(path)
        for folder in written_folders:
            if folder in opened:
                with os.scandir(opened[folder]) as entries:
                    reasons.extend(_link(directory / folder / entry.name)
                                   for entry in sorted(entries, key=lambda entry: entry.name)
                                   if entry.is_symlink())
    finally:
        for descriptor in opened.values():
            os.close(descriptor)
    if existing:
        reasons.append(f"{directory} already has {', '.join(existing)}; init writes into an "
                       "empty repository and overwrites nothing")
    return reasons


def write(directory: Path, files: Mapping[str, str], executable: Iterable[str] = ()) -> None:
    """Create `directory` (and the folders on the way) and each of `files` in it, never
    through a link; raises `WriteRefused` naming a link or file met on the way, after removing
    what it wrote."""
    executable = set(executable)
    created_files: list[tuple[int, str]] = []
    created_folders: list[tuple[int, str]] = []
    held: list[int] = []
    opened: dict[str, int] = {}
    try:
        opened[""] = _made(directory, created_folders, held)
        for path in sorted(files):
            parent = _made_folder(directory, _parent(path), opened, created_folders)
            name = PurePosixPath(path).name
            try:
                descriptor = os.open(name, _NEW_FILE_FLAGS, 0o666, dir_fd=parent)
            except FileExistsError:
                raise WriteRefused([_met(directory / path, parent, name)]) from None
            created_files.append((parent, name))
            with os.fdopen(descriptor, "wb") as handle:
                handle.write(files[path].encode("utf-8"))
                if path in executable:
                    os.fchmod(handle.fileno(), EXECUTABLE_MODE)
    except BaseException:
        _remove(created_files, created_folders)
        raise
    finally:
        for descriptor in [*held, *opened.values()]:
            os.close(descriptor)


def _met(shown: Path, parent: int, name: str) -> str:
    """What init met at `name` in `parent` where it meant to create something."""
    if _kind(parent, name) == stat.S_IFLNK:
        return f"{_link(shown)}; it appeared while init wrote, which removed what it wrote"
    return (f"{shown}: appeared while init wrote; init overwrites nothing, and removed what it "
            "wrote")


def _enter(parent: int, name: str, shown: Path, created: list[tuple[int, str]]) -> int:
    """The folder `name` in `parent`, created when missing, opened without following a link."""
    try:
        os.mkdir(name, dir_fd=parent)
        created.append((parent, name))
    except FileExistsError:
        pass
    try:
        return os.open(name, _FOLDER_FLAGS, dir_fd=parent)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR):
            raise WriteRefused([_met(shown, parent, name)]) from None
        raise


def _made(directory: Path, created: list[tuple[int, str]], held: list[int]) -> int:
    """`directory`, and the folders on the way to it, created when missing and opened; the
    folders before it stay open in `held` (what was created in them may have to go)."""
    current, names = _start(directory)
    shown = Path(directory.anchor)
    for name in names:
        held.append(current)
        shown /= name
        current = _enter(current, name, shown, created)
    return current


def _made_folder(directory: Path, folder: str, opened: dict[str, int],
                 created: list[tuple[int, str]]) -> int:
    """The folder `folder` of `directory` (relative), created when missing, opened once."""
    if folder in opened:
        return opened[folder]
    parent = _made_folder(directory, _parent(folder), opened, created)
    opened[folder] = _enter(parent, PurePosixPath(folder).name, directory / folder, created)
    return opened[folder]


def _remove(files: list[tuple[int, str]], folders: list[tuple[int, str]]) -> None:
    """Remove the files and (empty) folders init created, by name in their open parents."""
    for parent, name in reversed(files):
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=parent)
    for parent, name in reversed(folders):
        with contextlib.suppress(OSError):  # not empty: something else is in it now
            os.rmdir(name, dir_fd=parent)
