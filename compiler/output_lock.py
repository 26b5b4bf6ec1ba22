"""One build at a time per output tree.

The lock is flock(2) on the directory that holds the output tree (its parent), taken on the
directory itself, as `output_location` opened it without following a link: no lock file appears
next to or inside what Argo CD and Flux sync, and the kernel drops the lock when the process
ends however it ends, so a killed build never leaves a stale lock behind. Builds of one tree
wait for each other; `--check` takes the lock shared. It is advisory and local: it orders
tfcompile processes on one machine, not other writers.
"""

from __future__ import annotations

import errno
import fcntl
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .output_errors import OutputEnvironmentError, shown
from .output_location import OutputLocation, resolve


@contextmanager
def locked(output: Path, exclusive: bool) -> Iterator[OutputLocation]:
    """Hold the tree's lock (waiting for another build, and saying so) and give the output
    directory's location, its holder and (when it exists) itself open; when writing, the
    directories on the way to it are created first."""
    location = resolve(output, create=exclusive)
    try:
        if location.holder is not None:
            descriptor = location.holder.descriptor
            mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
            try:
                fcntl.flock(descriptor, mode | fcntl.LOCK_NB)
            except OSError as error:
                if error.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    raise OutputEnvironmentError("lock", location.holder.real, error) from None
                print(f"tfcompile: waiting for another build of {shown(output)} to finish",
                      file=sys.stderr)
                fcntl.flock(descriptor, mode)
            location.open_output()  # under the lock: another build may just have made it
        yield location
    finally:
        location.close()
