"""Putting a finished directory in place of another without a moment where neither is there.

Linux's renameat2(2) swaps two paths atomically (RENAME_EXCHANGE) and refuses to replace an
existing one (RENAME_NOREPLACE). Where it is missing (another system, or a file system without
it), `exchange` returns False and the caller replaces file by file instead.
"""

from __future__ import annotations

import ctypes
import errno
import os
from pathlib import Path

RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2
_AT_FDCWD = -100
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


def _call(source: Path, target: Path, flags: int) -> bool:
    """True when done, False when the system cannot do it; raises OSError otherwise."""
    if _FUNCTION is None:
        return False
    if _FUNCTION(_AT_FDCWD, os.fsencode(source), _AT_FDCWD, os.fsencode(target), flags) == 0:
        return True
    code = ctypes.get_errno()
    if code in _UNSUPPORTED:
        return False
    raise OSError(code, os.strerror(code), os.fspath(target))


def exchange(first: Path, second: Path) -> bool:
    """Swap two existing directories atomically; False when this system cannot."""
    return _call(first, second, RENAME_EXCHANGE)


def move_into_place(source: Path, target: Path) -> None:
    """Rename `source` to `target`, which must not exist (never replaces an empty directory)."""
    if _call(source, target, RENAME_NOREPLACE):
        return
    if os.path.lexists(target):
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), os.fspath(target))
    os.rename(source, target)
