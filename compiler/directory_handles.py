"""Directories opened without following a link, and the file operations a build does in them.

A path is looked up again every time it is used: a directory swapped for a symbolic link to an
outside directory between two uses sends the second one outside. So every write, move, mode
change and deletion in the output tree happens relative to a directory this module opened with
O_NOFOLLOW|O_DIRECTORY (`openat`, `mkdirat`, `renameat`, `unlinkat`, `fchmod`), by a name
inside it, never through a path of several parts: a swap in the middle of a build cannot
redirect it, since the build holds the directory itself, not its name.

Each `Directory` keeps two paths besides its descriptor: how it is shown in messages (as the user
named it) and where it is, without links (as resolved when it was opened), from which the
relative paths recorded in the tree (a job's spec) are read lexically.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

from .output_errors import OutputEnvironmentError, OutputRefused, shown

_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_MISSING = {errno.ENOENT, errno.ENOTDIR}
MAXIMUM_DEPTH = 64
"""Folders kept in a job directory may nest this deep; tfcompile refuses deeper ones."""


class Directory:
    """An open directory: its descriptor, how it is shown, and its path without links."""

    def __init__(self, descriptor: int, path: Path, real: str) -> None:
        self.descriptor = descriptor
        self.path = path
        self.real = real

    def __enter__(self) -> Directory:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        if self.descriptor >= 0:
            os.close(self.descriptor)
            self.descriptor = -1

    def identity(self) -> tuple[int, int]:
        """The device and inode of the directory itself."""
        status = os.fstat(self.descriptor)
        return status.st_dev, status.st_ino

    def status(self, name: str) -> os.stat_result | None:
        """An entry as lstat sees it (a link is not followed); None when it is missing."""
        try:
            return os.stat(name, dir_fd=self.descriptor, follow_symlinks=False)
        except OSError as error:
            if error.errno in _MISSING:
                return None
            raise OutputEnvironmentError("read", self.path / name, error) from None

    def entries(self) -> dict[str, os.stat_result]:
        """The entries by name, as lstat sees them."""
        try:
            with os.scandir(self.descriptor) as listing:
                return {entry.name: entry.stat(follow_symlinks=False) for entry in listing}
        except OSError as error:
            raise OutputEnvironmentError("read", self.path, error) from None

    def open(self, name: str) -> Directory | None:
        """The subdirectory `name`, opened without following a link; None when it is missing.
        Raises `OutputRefused` when it is a link or not a directory."""
        try:
            descriptor = os.open(name, _DIRECTORY_FLAGS, dir_fd=self.descriptor)
        except OSError as error:
            if error.errno == errno.ENOENT:
                return None
            if error.errno in (errno.ENOTDIR, errno.ELOOP):
                status = self.status(name)
                if status is None:
                    return None
                if stat.S_ISLNK(status.st_mode):
                    raise OutputRefused([f"{shown(self.path / name)}: is a symbolic link; "
                                         "tfcompile never follows links in the output tree, "
                                         "remove it"]) from None
                if stat.S_ISDIR(status.st_mode):
                    raise OutputRefused([f"{shown(self.path / name)}: was a symbolic link or "
                                         "a file for a moment while tfcompile read it; "
                                         "nothing was followed, build again"]) from None
                raise OutputRefused([f"{shown(self.path / name)}: is a file where tfcompile "
                                     "expects a directory; move it away"]) from None
            raise OutputEnvironmentError("open", self.path / name, error) from None
        return Directory(descriptor, self.path / name, os.path.join(self.real, name))

    def read(self, name: str) -> str | None:
        """A regular file's text; None when it is missing, a link, not a file or not UTF-8."""
        try:
            descriptor = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
                                 | os.O_NONBLOCK, dir_fd=self.descriptor)
        except OSError as error:
            if error.errno in (*_MISSING, errno.ELOOP, errno.EISDIR, errno.ENXIO):
                return None
            raise OutputEnvironmentError("read", self.path / name, error) from None
        try:
            if not stat.S_ISREG(os.fstat(descriptor).st_mode):
                return None
            with os.fdopen(descriptor, "rb", closefd=False) as handle:
                data = handle.read()
        except OSError as error:
            raise OutputEnvironmentError("read", self.path / name, error) from None
        finally:
            os.close(descriptor)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return None

    def write_new(self, name: str, text: str, shown_as: Path) -> None:
        """Create the file `name` (it must not exist) holding `text`."""
        try:
            descriptor = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                                 | os.O_CLOEXEC, 0o666, dir_fd=self.descriptor)
            with os.fdopen(descriptor, "wb") as handle:
                handle.write(text.encode("utf-8"))
        except OSError as error:
            raise OutputEnvironmentError("write", shown_as, error) from None

    def make(self, name: str, mode: int = 0o777) -> Directory:
        """Create the subdirectory `name` and open it."""
        os.mkdir(name, mode, dir_fd=self.descriptor)
        opened = self.open(name)
        if opened is None:  # removed at once by someone else
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT),
                                    os.fspath(self.path / name))
        return opened

    def rename(self, name: str, target: Directory, target_name: str) -> None:
        """Move the entry `name` (not what a link points to) to `target_name` in `target`."""
        os.rename(name, target_name, src_dir_fd=self.descriptor,
                  dst_dir_fd=target.descriptor)

    def replace(self, name: str, target: Directory, target_name: str) -> None:
        os.replace(name, target_name, src_dir_fd=self.descriptor,
                   dst_dir_fd=target.descriptor)

    def unlink(self, name: str) -> None:
        os.unlink(name, dir_fd=self.descriptor)

    def set_mode(self, mode: int) -> None:
        os.fchmod(self.descriptor, mode)

    def copy_entry(self, name: str, target: Directory, depth: int = 0) -> None:
        """Put the entry `name` into `target` without copying or following it where it can:
        files as hard links, links as links, directories entry by entry with their mode."""
        status = self.status(name)
        if status is None:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT),
                                    os.fspath(self.path / name))
        if stat.S_ISLNK(status.st_mode):
            os.symlink(os.readlink(name, dir_fd=self.descriptor), name,
                       dir_fd=target.descriptor)
        elif stat.S_ISDIR(status.st_mode):
            if depth >= MAXIMUM_DEPTH:
                raise OutputRefused([f"{shown(self.path / name)}: folders nested deeper than "
                                     f"{MAXIMUM_DEPTH} levels; tfcompile cannot keep them "
                                     "while replacing the job directory, move them away"])
            source = self.open(name)
            if source is None:
                raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT),
                                        os.fspath(self.path / name))
            with source, target.make(name, 0o700) as copy:
                for entry in sorted(source.entries()):
                    source.copy_entry(entry, copy, depth + 1)
                copy.set_mode(stat.S_IMODE(os.fstat(source.descriptor).st_mode))
        elif stat.S_ISREG(status.st_mode):
            try:
                os.link(name, name, src_dir_fd=self.descriptor, dst_dir_fd=target.descriptor,
                        follow_symlinks=False)
            except OSError:
                self._copy_file(name, target)
        else:
            raise OutputRefused([f"{shown(self.path / name)}: not a file, directory or link; "
                                 "tfcompile cannot keep it while replacing the job directory, "
                                 "move it away"])

    def _copy_file(self, name: str, target: Directory) -> None:
        """A copy of a regular file, with its mode and times, where a hard link is refused."""
        source = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
                         dir_fd=self.descriptor)
        try:
            status = os.fstat(source)
            if not stat.S_ISREG(status.st_mode):
                raise FileNotFoundError(errno.ENOENT, "no longer a regular file",
                                        os.fspath(self.path / name))
            copy = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                           | os.O_CLOEXEC, 0o600, dir_fd=target.descriptor)
            try:
                while chunk := os.read(source, 1 << 20):
                    os.write(copy, chunk)
                os.fchmod(copy, stat.S_IMODE(status.st_mode))
                os.utime(copy, ns=(status.st_atime_ns, status.st_mtime_ns))
            finally:
                os.close(copy)
        finally:
            os.close(source)

    def remove_tree(self, name: str, spare_names: Iterator[str]) -> None:
        """Remove the entry `name` and everything under it, without recursion and with one
        directory open at a time: each subdirectory found is first moved up into this
        directory under the next of `spare_names` (names the caller reserves), then removed
        in turn. A link is removed, never followed."""
        pending = [name]
        while pending:
            current = pending.pop()
            status = self.status(current)
            if status is None:
                continue
            if not stat.S_ISDIR(status.st_mode):
                self.unlink(current)
                continue
            try:
                directory = self.open(current)
            except OutputRefused:  # no longer a directory: the entry itself goes
                self.unlink(current)
                continue
            if directory is None:
                continue
            with directory:
                if stat.S_IMODE(status.st_mode) & 0o700 != 0o700:
                    directory.set_mode(0o700)  # a read-only job directory's mode, carried over
                for entry, entry_status in directory.entries().items():
                    if stat.S_ISDIR(entry_status.st_mode):
                        spare = next(spare_names)
                        inner = directory.open(entry)
                        if inner is not None:
                            with inner:  # moving a directory rewrites its `..`
                                inner.set_mode(0o700)
                        directory.rename(entry, self, spare)
                        pending.append(spare)
                    else:
                        directory.unlink(entry)
            os.rmdir(current, dir_fd=self.descriptor)
