"""One build at a time per output tree, and output paths tfcompile refuses to write.

The lock is flock(2) on the directory that holds the output tree (its parent), taken on the
directory itself: no lock file appears next to or inside what Argo CD and Flux sync, and the
kernel drops the lock when the process ends however it ends, so a killed build never leaves a
stale lock behind. Builds of one tree wait for each other; `--check` takes the lock shared.
It is advisory and local: it orders tfcompile processes on one machine, not other writers.
"""

from __future__ import annotations

import errno
import fcntl
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .output_errors import OutputEnvironmentError, OutputRefused, shown


def check_output_path(output: Path) -> None:
    """Refuse an output path that is a file, a symbolic link, or inside a `.git` directory."""
    if ".git" in Path(os.path.abspath(output)).parts:
        raise OutputRefused([f"{shown(output)}: the output directory is inside .git; "
                             "choose another with -o"])
    if output.is_symlink():
        raise OutputRefused([f"{shown(output)}: the output directory is a symbolic link; "
                             "tfcompile never follows links in the output tree, name the real "
                             "directory with -o"])
    if output.exists() and not output.is_dir():
        raise OutputRefused([f"{shown(output)}: the output path is a file, not a directory; "
                             "choose another with -o"])
    for ancestor in Path(os.path.abspath(output)).parents:
        if os.path.lexists(ancestor):
            if not ancestor.is_dir():
                raise OutputRefused([f"{shown(ancestor)}: is a file, so {shown(output)} cannot "
                                     "be the output directory; choose another with -o"])
            break


@contextmanager
def locked(output: Path, exclusive: bool) -> Iterator[None]:
    """Hold the tree's lock (waiting for another build, and saying so); create the holder of
    the output directory when writing."""
    check_output_path(output)
    holder = Path(os.path.abspath(output)).parent
    if exclusive:
        try:
            holder.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise OutputEnvironmentError("create", holder, error) from None
    elif not holder.is_dir():
        yield
        return
    try:
        descriptor = os.open(holder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as error:
        raise OutputEnvironmentError("open", holder, error) from None
    try:
        mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
        try:
            fcntl.flock(descriptor, mode | fcntl.LOCK_NB)
        except OSError as error:
            if error.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise OutputEnvironmentError("lock", holder, error) from None
            print(f"tfcompile: waiting for another build of {shown(output)} to finish",
                  file=sys.stderr)
            fcntl.flock(descriptor, mode)
        yield
    finally:
        os.close(descriptor)
