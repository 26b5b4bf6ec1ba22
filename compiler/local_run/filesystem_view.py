"""The filesystem a container sees, built inside its own private mount namespace.

Images are not pulled, so a container sees this machine's files, as a container sees its image:
its root is an overlay whose lower layer is the host's root filesystem and whose upper layer is a
tmpfs made for this container start (so anything it writes outside its volumes is discarded when it
exits, as a container's writable layer is). The host's other mounts are bound back in at their
places, except /proc (a new one for the container's PID namespace), /sys (a new one showing the
pod's network devices) and /dev/shm (a tmpfs of its own). Then the pod's volumes and its hosts file
are bound at their paths and the process changes its root to the overlay.

Mount points that do not exist (like /opt/tfcompile/state) are created in an upper layer only:
in the root overlay, in a volume the container may write, or else in a new overlay stacked on the
nearest existing directory, its upper and work directories on the tmpfs. Nothing is ever created
or mounted in the host's own mount namespace: when the container's processes end, the namespace
and every mount in it disappear.

A volume's `subPath` is resolved at every start, one component at a time from a descriptor of
the volume's directory, never following a link (`open_beneath`): since the last start the pod
may have replaced a folder of its volume with a link to anywhere on this machine, and the
helper still acts as the host's root. Such a link stops the container from starting (as the
kubelet refuses one); what is mounted is the file the descriptor holds, not a path looked up
again.

Only the standard library is used; this runs in the small helper that becomes the container.
"""

from __future__ import annotations

import errno
import os
import posixpath
import re
import stat
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from . import linux

_ESCAPED = re.compile(r"\\([0-7]{3})")
_MAXIMUM_SYMBOLIC_LINKS = 40
_PRIVATE_DIRECTORY_MOUNT_FLAGS = linux.MS_NOSUID | linux.MS_NODEV


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


def _is_within(path: str, directory: str) -> bool:
    return directory == "/" or path == directory or path.startswith(directory + "/")


def _depth(path: str) -> int:
    return len([part for part in path.split("/") if part])


def mount_points() -> list[str]:
    """The mount points of the calling process's mount namespace, without duplicates."""
    points: list[str] = []
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as table:
        for line in table:
            fields = line.split(" ")
            point = _ESCAPED.sub(lambda match: chr(int(match.group(1), 8)), fields[4])
            if point not in points:
                points.append(point)
    return points


def _escape_overlay_option(path: str) -> str:
    return path.replace("\\", "\\\\").replace(",", "\\,").replace(":", "\\:")


def _warn(message: str) -> None:
    sys.stderr.write(f"tfcompile run-local: {message}\n")


class ContainerFilesystem:
    """Builds one container's view under `root` (a directory on the staging tmpfs)."""

    def __init__(self, staging: str) -> None:
        self.staging = staging
        self.root = posixpath.join(staging, "root")
        self._writable: set[str] = set()
        self._overlays = 0

    # Paths ---------------------------------------------------------------------------------

    def host_path(self, container_path: str) -> str:
        """Where `container_path` lies under the root, following symbolic links within it."""
        pending = [part for part in container_path.split("/") if part]
        pending.reverse()
        resolved: list[str] = []
        links = 0
        while pending:
            part = pending.pop()
            if part == ".":
                continue
            if part == "..":
                if resolved:
                    resolved.pop()
                continue
            candidate = posixpath.join(self.root, *resolved, part)
            if os.path.islink(candidate):
                links += 1
                if links > _MAXIMUM_SYMBOLIC_LINKS:
                    raise OSError(errno.ELOOP, f"too many symbolic links in {container_path}")
                target = os.readlink(candidate)
                if target.startswith("/"):
                    resolved = []
                pending.extend(reversed([piece for piece in target.split("/") if piece]))
                continue
            resolved.append(part)
        return posixpath.join(self.root, *resolved)

    def _nearest_existing(self, path: str) -> str:
        while not os.path.lexists(path):
            path = posixpath.dirname(path)
        return path

    def _deepest_mount(self, path: str) -> str:
        containing = [point for point in mount_points() if _is_within(path, point)]
        return max(containing, key=len)

    # Mounting ------------------------------------------------------------------------------

    def _new_layer(self) -> tuple[str, str]:
        self._overlays += 1
        layer = posixpath.join(self.staging, f"layer-{self._overlays}")
        upper, work = posixpath.join(layer, "upper"), posixpath.join(layer, "work")
        os.makedirs(upper)
        os.makedirs(work)
        return upper, work

    def _mount_overlay(self, lower: str, target: str) -> None:
        upper, work = self._new_layer()
        options = (f"lowerdir={_escape_overlay_option(lower)},"
                   f"upperdir={_escape_overlay_option(upper)},"
                   f"workdir={_escape_overlay_option(work)}")
        linux.mount("overlay", target, "overlay", 0, options)
        self._writable.add(target)

    def _overlay_in_place(self, directory: str) -> None:
        """Stack an overlay on `directory`, keeping the mounts below it visible."""
        hidden = sorted((point for point in mount_points()
                         if point != directory and _is_within(point, directory)), key=_depth)
        descriptors = [(point, os.open(point, os.O_PATH | os.O_CLOEXEC)) for point in hidden]
        try:
            self._mount_overlay(directory, directory)
            for point, descriptor in descriptors:
                linux.mount(f"/proc/self/fd/{descriptor}", point, None, linux.MS_BIND)
        finally:
            for _, descriptor in descriptors:
                os.close(descriptor)

    def build_root(self, host_mounts: Sequence[str]) -> None:
        """The root overlay, with the host's mounts bound back in (see the module's docstring)."""
        os.makedirs(self.root)
        self._mount_overlay("/", self.root)
        mounted_system = False
        for point in sorted(host_mounts, key=_depth):
            if point == "/" or _is_within(point, "/proc") or _is_within(point, "/dev/shm"):
                continue
            target = self.root + point
            if point == "/sys":
                try:
                    linux.mount("sysfs", target, "sysfs", _PRIVATE_DIRECTORY_MOUNT_FLAGS
                                | linux.MS_NOEXEC)
                    mounted_system = True
                    continue
                except OSError:
                    pass
            if mounted_system and _is_within(point, "/sys") and not os.path.lexists(target):
                continue
            try:
                linux.mount(point, target, None, linux.MS_BIND)
            except OSError as error:
                _warn(f"the host's mount {point} is not visible in the container ({error})")
        linux.mount("proc", self.root + "/proc", "proc",
                    _PRIVATE_DIRECTORY_MOUNT_FLAGS | linux.MS_NOEXEC)
        shared_memory = self.root + "/dev/shm"
        if os.path.isdir(shared_memory):
            linux.mount("tmpfs", shared_memory, "tmpfs", _PRIVATE_DIRECTORY_MOUNT_FLAGS,
                        "mode=1777")

    def ensure(self, container_path: str, directory: bool) -> str:
        """Make `container_path` exist (as a directory or a file) without touching the host."""
        path = self.host_path(container_path)
        if os.path.lexists(path):
            if directory and not os.path.isdir(path):
                raise OSError(errno.ENOTDIR, f"{container_path} exists and is not a directory")
            if not directory and os.path.isdir(path):
                raise OSError(errno.EISDIR, f"{container_path} exists and is a directory")
            return path
        existing = self._nearest_existing(path)
        if self._deepest_mount(existing) not in self._writable:
            self._overlay_in_place(existing)
        if directory:
            os.makedirs(path)
        else:
            os.makedirs(posixpath.dirname(path), exist_ok=True)
            with open(path, "x"):
                pass
        return path

    def bind(self, request: MountRequest) -> None:
        """Bind a volume's host directory (or file, or what its subPath names) at its path in
        the container."""
        descriptor = open_beneath(request.source, request.sub_path, request.create)
        try:
            directory = stat.S_ISDIR(os.fstat(descriptor).st_mode)
            target = self.ensure(request.target, directory=directory)
            linux.mount(f"/proc/self/fd/{descriptor}", target, None, linux.MS_BIND)
        finally:
            os.close(descriptor)
        if request.read_only:
            linux.mount(None, target, None, linux.MS_BIND | linux.MS_REMOUNT | linux.MS_RDONLY)
        else:
            self._writable.add(target)

    def enter(self, working_directory: str) -> None:
        """Make the built view this process's root, and change to the working directory."""
        os.chdir(self.root)
        os.chroot(".")
        os.chdir(working_directory)


def prepare(staging: str, mounts: Iterable[MountRequest], working_directory: str) -> None:
    """Build the container's filesystem and enter it; the caller is in a new mount namespace."""
    linux.mount(None, "/", None, linux.MS_REC | linux.MS_PRIVATE)
    host_mounts = mount_points()
    linux.mount("tmpfs", staging, "tmpfs", _PRIVATE_DIRECTORY_MOUNT_FLAGS, "mode=0700")
    view = ContainerFilesystem(staging)
    view.build_root(host_mounts)
    for request in sorted(mounts, key=lambda request: _depth(request.target)):
        view.bind(request)
    view.ensure(working_directory, directory=True)
    view.enter(working_directory)
