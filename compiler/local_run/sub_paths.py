"""A volume's `subPath`, resolved on the host without following a link.

A `subPath` is resolved at every container start, one component at a time from a descriptor of
the volume's directory, never following a link (`open_beneath`): since the last start a pod may
have replaced a folder of its volume (an emptyDir, a claim shared with other pods) with a link to
anywhere on this machine, and run-local acts as the host's root. Such a link stops the container
from starting (as the kubelet refuses one). The path podman mounts is the one the descriptor
holds, read back from `/proc/self/fd` (`resolved_source`), and is checked to lie below the
volume's directory.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass


@dataclass(frozen=True)
class MountRequest:
    """A host file or directory to appear at `target` inside the container: `source` (a path
    the runner made or chose), or with `sub_path` the file or folder that relative path names
    under it, reached without following a link; `create`: missing folders of `sub_path` are
    made (an emptyDir's or a claim's)."""

    source: str
    target: str
    read_only: bool
    sub_path: str = ""
    create: bool = False


def open_beneath(source: str, sub_path: str, create: bool) -> int:
    """An `O_PATH` descriptor of `sub_path` under the directory `source`, every component
    opened relative to the one before with `O_NOFOLLOW`: a link, `..` or an absolute path
    raises OSError naming it. With `create`, missing folders are made with the owner, group and
    mode of `source` (as the kubelet makes a missing subPath with its volume's mode)."""
    flags = os.O_PATH | os.O_CLOEXEC
    current = os.open(source, flags)
    try:
        if not sub_path:
            return current
        if sub_path.startswith("/"):
            raise OSError(errno.EINVAL, f"subPath {sub_path!r} is absolute")
        base = os.fstat(current)
        parts = [part for part in sub_path.split("/") if part not in ("", ".")]
        for index, part in enumerate(parts):
            if part == "..":
                raise OSError(errno.EINVAL, f"subPath {sub_path!r} holds '..'")
            try:
                child = os.open(part, flags | os.O_NOFOLLOW, dir_fd=current)
            except FileNotFoundError:
                if not create:
                    raise
                child = _make_folder(current, part, base)
            os.close(current)
            current = child
            status = os.fstat(current)
            if stat.S_ISLNK(status.st_mode):
                raise OSError(errno.ELOOP, f"subPath {sub_path!r}: "
                              f"{'/'.join(parts[:index + 1])} is a symbolic link; a subPath "
                              "is never followed through a link (the pod may have made it)")
            if index < len(parts) - 1 and not stat.S_ISDIR(status.st_mode):
                raise OSError(errno.ENOTDIR, f"subPath {sub_path!r}: "
                              f"{'/'.join(parts[:index + 1])} is not a directory")
        return current
    except BaseException:
        os.close(current)
        raise


def _make_folder(parent: int, name: str, base: os.stat_result) -> int:
    """Make the folder `name` in `parent` like `base` (owner, group, mode); its `O_PATH`
    descriptor."""
    try:
        os.mkdir(name, 0o700, dir_fd=parent)
    except FileExistsError:
        pass  # made meanwhile: judged like any other component
    else:
        folder = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                         dir_fd=parent)
        try:
            os.fchown(folder, base.st_uid, base.st_gid)
            os.fchmod(folder, stat.S_IMODE(base.st_mode))
        finally:
            os.close(folder)
    return os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)


def resolved_source(request: MountRequest) -> str:
    """The host path to mount for `request`: its source, or the file or folder its `subPath`
    names under it, reached without following a link; OSError says why it cannot be mounted."""
    if not request.sub_path:
        return request.source
    descriptor = open_beneath(request.source, request.sub_path, request.create)
    try:
        path = os.readlink(f"/proc/self/fd/{descriptor}")
    finally:
        os.close(descriptor)
    base = os.path.realpath(request.source)
    if not path.startswith(base.rstrip("/") + "/"):
        raise OSError(errno.EXDEV, f"subPath {request.sub_path!r} is not below its volume")
    return path
