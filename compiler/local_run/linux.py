"""The few Linux system calls the local runtime needs that Python 3.11's `os` module lacks.

`unshare`, `setns`, `mount` and `prctl(PR_SET_PDEATHSIG)` are called through libc with
`ctypes`. Only the standard library is imported, so the small helper processes that run inside a
pod's namespaces start fast.
"""

from __future__ import annotations

import ctypes
import os
import signal

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000


_PR_SET_PDEATHSIG = 1
_PR_SET_NO_NEW_PRIVS = 38

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_ulong,
    ctypes.c_char_p,
]
_libc.mount.restype = ctypes.c_int
_libc.unshare.argtypes = [ctypes.c_int]
_libc.unshare.restype = ctypes.c_int
_libc.setns.argtypes = [ctypes.c_int, ctypes.c_int]
_libc.setns.restype = ctypes.c_int
_libc.prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4
_libc.prctl.restype = ctypes.c_int


def _check(result: int, what: str) -> None:
    if result != 0:
        number = ctypes.get_errno()
        raise OSError(number, f"{what}: {os.strerror(number)}")


def _encode(text: str | None) -> bytes | None:
    return None if text is None else os.fsencode(text)


def unshare(flags: int) -> None:
    """Move the calling process into new namespaces of the kinds in `flags`."""
    _check(_libc.unshare(flags), "unshare")


def setns(descriptor: int, kind: int) -> None:
    """Join the namespace that the open file `descriptor` refers to."""
    _check(_libc.setns(descriptor, kind), "setns")


def mount(source: str | None, target: str, filesystem: str | None, flags: int,
          data: str | None = None) -> None:
    """mount(2); errors name the target."""
    result = _libc.mount(_encode(source), _encode(target), _encode(filesystem), flags,
                         _encode(data))
    _check(result, f"mount {filesystem or 'bind'} on {target}")


def die_with_parent() -> None:
    """Have the kernel send SIGKILL to this process when the thread that started it ends."""
    _check(_libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl")


def no_new_privileges() -> None:
    """`allowPrivilegeEscalation: false`: set-user-ID programs cannot raise privileges."""
    _check(_libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl")
