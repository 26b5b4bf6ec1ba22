"""Where the output directory is: `-o` resolved one component at a time, following no link.

The kernel resolves a path through every link on it, so with `g` a link to `.git`, `-o g/hooks`
names `.git/hooks` although no part of it says so. tfcompile walks `-o` itself instead, from the
working directory (or from `/` when the path is absolute), opening each component with
O_NOFOLLOW relative to the one before: a symbolic link anywhere on the way is refused, naming
it, and so is a file; `..` goes to the parent of the directory reached so far (a real parent,
since no link was followed to get there). Where the path lands, written without links, must not
be inside a `.git` directory. Missing directories on the way are created when writing, each the
same way, one at a time.

The result holds the directory that holds the output directory open (the tree's lock is taken
on it, `output_lock`), and then the output directory itself: the build works in them from then
on (`directory_handles`), whatever later happens to their names.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from .directory_handles import Directory
from .output_errors import OutputEnvironmentError, OutputRefused

_WALK_FLAGS = (getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_NOFOLLOW
               | os.O_CLOEXEC)
"""To pass through a directory: O_PATH needs no right to read it, only to enter it."""
_READ_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
GIT_DIRECTORY = ".git"


@dataclass
class OutputLocation:
    """The output directory as the user named it (`path`), where it is without links (`real`),
    the directory that holds it, open (None when it does not exist and nothing is written),
    and, once `open_output` found or `create` made it, the output directory, open."""

    path: Path
    real: str
    holder: Directory | None
    directory: Directory | None = None

    @property
    def name(self) -> str:
        return os.path.basename(self.real)

    def open_output(self) -> Directory | None:
        """The output directory, opened without following a link (None when missing)."""
        if self.directory is None and self.holder is not None:
            try:
                self.directory = self.holder.open(self.name)
            except OutputRefused:
                raise _in_the_way(self.holder, self.name, self.path, self.path) from None
            if self.directory is not None:
                self.directory.path = self.path
                self.directory.real = self.real
        return self.directory

    def create(self) -> Directory:
        """The output directory, created when missing."""
        directory = self.open_output()
        if directory is not None:
            return directory
        assert self.holder is not None, "the holder is created when writing"
        try:
            os.mkdir(self.name, dir_fd=self.holder.descriptor)
        except FileExistsError:
            pass
        except OSError as error:
            raise OutputEnvironmentError("create", self.path, error) from None
        directory = self.open_output()
        if directory is None:
            raise OutputEnvironmentError("create", self.path, FileNotFoundError(
                errno.ENOENT, os.strerror(errno.ENOENT)))
        return directory

    def close(self) -> None:
        for directory in (self.directory, self.holder):
            if directory is not None:
                directory.close()


def _in_the_way(parent: Directory | int, name: str, shown_as: Path | str,
                output: Path) -> OutputRefused:
    """The refusal for `name` in `parent`, which cannot be opened as a directory."""
    descriptor = parent.descriptor if isinstance(parent, Directory) else parent
    try:
        status: os.stat_result | None = os.stat(name, dir_fd=descriptor, follow_symlinks=False)
    except OSError:
        status = None
    last = os.fspath(shown_as) == os.fspath(output)
    link = status is not None and stat.S_ISLNK(status.st_mode)
    if last and link:
        return OutputRefused([f"{os.fspath(output)}: the output directory is a symbolic link; "
                              "tfcompile never follows links in the output tree, name the real "
                              "directory with -o"])
    if last:
        return OutputRefused([f"{os.fspath(output)}: the output path is a file, not a "
                              "directory; choose another with -o"])
    if link:
        return OutputRefused([f"{os.fspath(shown_as)}: is a symbolic link, so "
                              f"{os.fspath(output)} cannot be the output directory (tfcompile "
                              "follows no link on the way to it); name the directory itself "
                              "with -o"])
    return OutputRefused([f"{os.fspath(shown_as)}: is a file, so {os.fspath(output)} cannot be "
                          "the output directory; choose another with -o"])


def _enter(current: int, name: str, shown_as: Path, output: Path) -> int | None:
    """The directory `name` in `current`, for passing through; None when it is missing."""
    try:
        return os.open(name, _WALK_FLAGS, dir_fd=current)
    except OSError as error:
        if error.errno == errno.ENOENT:
            return None
        if error.errno in (errno.ENOTDIR, errno.ELOOP):
            raise _in_the_way(current, name, shown_as, output) from None
        raise OutputEnvironmentError("open", shown_as, error) from None


def _walk(output: Path) -> tuple[int, str, list[str], list[Path]]:
    """Walk `output` as far as it exists: the last directory reached (open for passing
    through), its path without links, the names still missing after it, and each missing
    name as the user wrote its path."""
    parts = output.parts
    absolute = output.is_absolute()
    try:
        real = "/" if absolute else os.getcwd()
        current = os.open("/" if absolute else ".", _WALK_FLAGS)
    except OSError as error:
        raise OutputEnvironmentError("open", "the working directory", error) from None
    missing: list[str] = []
    missing_shown: list[Path] = []
    try:
        for index, part in enumerate(parts):
            if absolute and index == 0:
                continue
            shown_as = Path(*parts[: index + 1])
            if missing:
                if part == "..":
                    missing.pop()
                    missing_shown.pop()
                else:
                    missing.append(part)
                    missing_shown.append(shown_as)
                continue
            following = _enter(current, part, shown_as, output)
            if following is None:
                missing.append(part)
                missing_shown.append(shown_as)
                continue
            os.close(current)
            current = following
            real = os.path.dirname(real) if part == ".." else os.path.join(real, part)
    except BaseException:
        os.close(current)
        raise
    return current, real, missing, missing_shown


def resolve(output: Path, create: bool) -> OutputLocation:
    """The output directory `output` names, walked without following a link; with `create`,
    the directories missing on the way to it are created (not the output directory itself).
    Raises `OutputRefused` for a link or a file on the way, or a path inside `.git`."""
    current, real, missing, missing_shown = _walk(output)
    try:
        landing = os.path.join(real, *missing)
        if any(part.casefold() == GIT_DIRECTORY for part in Path(landing).parts):
            raise OutputRefused([f"{os.fspath(output)}: the output directory is inside .git; "
                                 "choose another with -o"])
        if os.path.dirname(landing) == landing:
            raise OutputRefused([f"{os.fspath(output)}: the root directory cannot be the "
                                 "output directory; choose another with -o"])
        if not missing:  # the output directory exists: its holder is its real parent
            holder_descriptor = os.open("..", _WALK_FLAGS, dir_fd=current)
            os.close(current)
            current = holder_descriptor
        else:
            for name, shown_as in zip(missing[:-1], missing_shown[:-1], strict=True):
                if not create:  # nothing is written: there is nothing to lock or read
                    return OutputLocation(output, landing, None)
                try:
                    os.mkdir(name, dir_fd=current)
                except FileExistsError:
                    pass
                except OSError as error:
                    raise OutputEnvironmentError("create", shown_as, error) from None
                following = _enter(current, name, shown_as, output)
                if following is None:
                    raise OutputEnvironmentError("create", shown_as, FileNotFoundError(
                        errno.ENOENT, os.strerror(errno.ENOENT)))
                os.close(current)
                current = following
        try:
            holder = os.open(".", _READ_FLAGS, dir_fd=current)
        except OSError as error:
            raise OutputEnvironmentError("open", os.path.dirname(landing), error) from None
    finally:
        os.close(current)
    return OutputLocation(output, landing,
                          Directory(holder, output.parent, os.path.dirname(landing)))
