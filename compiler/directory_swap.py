"""Putting a finished directory in place of another without a moment where neither is there.

Linux's renameat2(2) swaps two entries atomically (RENAME_EXCHANGE) and refuses to replace an
existing one (RENAME_NOREPLACE). Both names are looked up in a directory the caller holds open
(`directory_handles`), and renaming never follows a link: an entry that is a link is moved
itself. Where renameat2 is missing (another system, or a file system without it), `exchange`
returns False and the caller replaces file by file instead.
"""

from __future__ import annotations

import ctypes
import errno
import os

RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2
_UNSUPPORTED = {errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP}


def _renameat2() -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    try:
        function = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                         ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


_FUNCTION = _renameat2()


def _call(directory: int, source: str, target: str, flags: int) -> bool:
    """True when done, False when the system cannot do it; raises OSError otherwise."""
    if _FUNCTION is None:
        return False
    if _FUNCTION(directory, os.fsencode(source), directory, os.fsencode(target), flags) == 0:
        return True
    code = ctypes.get_errno()
    if code in _UNSUPPORTED:
        return False
    raise OSError(code, os.strerror(code), target)


def exchange(directory: int, first: str, second: str) -> bool:
    """Swap two existing entries of the open `directory` atomically; False when this system
    cannot."""
    return _call(directory, first, second, RENAME_EXCHANGE)


def move_into_place(directory: int, source: str, target: str) -> None:
    """Rename `source` to `target` in the open `directory`; `target` must not exist (an empty
    directory there is not replaced)."""
    if _call(directory, source, target, RENAME_NOREPLACE):
        return
    try:
        os.stat(target, dir_fd=directory, follow_symlinks=False)
    except FileNotFoundError:
        os.rename(source, target, src_dir_fd=directory, dst_dir_fd=directory)
        return
    raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), target)
