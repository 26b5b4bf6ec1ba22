"""The host directories behind a pod's volumes, and the mounts each of its containers asks for.

All of them live in the run's temporary directory, never at the paths the pods see:
- emptyDir: one directory per pod and volume, kept across the pod's container restarts
  (`medium: Memory` and `sizeLimit` are not enforced: it is a plain directory);
- persistentVolumeClaim: one directory per claim name, shared by every pod that mounts the claim;
- configMap / secret: the keys written as files (respecting `items`, `defaultMode` and `mode`),
  mounted read-only as the kubelet does. ConfigMap data comes from the caller (`data` as text,
  `binaryData` as bytes: the launcher's zip); Secret data from the secrets file.
Other volume kinds are refused before the run starts.
What the runner makes belongs to root, as a volume the kubelet makes does (podman runs the
pods with this machine's user and group IDs, as a Kubernetes node runs a pod without
`hostUsers: false`); a claim a pod's `fsGroup` shares belongs to that group.

A claim, ConfigMap or Secret is known by name, never by path: a name that is not a DNS
subdomain refuses the run (`volume_references`), so a claim's directory is always one entry of
the claims directory. Owners and modes are changed only below a volume's own directory, through
descriptors opened without following a link (what a pod wrote into a kept claim may be a link
to anywhere). A mount's `subPath` is resolved when its container starts, one component at a
time without following a link (`sub_paths.open_beneath`), since the pod may have replaced
a folder with a link since the last start.
"""

from __future__ import annotations

import errno
import os
import posixpath
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfcompile.compiler.rendering.pods import Container, Pod, Volume
from tfcompile.spec.volume_references import NAME_RULE, is_object_name, volume_name_problems

from .identity import fs_group
from .sub_paths import MountRequest

EMPTY_DIRECTORY = "emptyDir"
CLAIM = "persistentVolumeClaim"
CONFIG_MAP = "configMap"
SECRET = "secret"
SUPPORTED_KINDS = (EMPTY_DIRECTORY, CLAIM, CONFIG_MAP, SECRET)
DEFAULT_FILE_MODE = 0o644


Content = str | bytes
"""A file of a configMap volume: text (`data`) or bytes (`binaryData`)."""


@dataclass(frozen=True)
class ProjectedFile:
    """One file of a configMap or secret volume."""

    path: str
    text: Content
    mode: int


def relative_path_problem(path: str) -> str | None:
    """Why `path` cannot be a path inside a volume, or None when it can."""
    if not path:
        return "is empty"
    if path.startswith("/"):
        return "must be relative"
    if ".." in path.split("/"):
        return "must not contain '..'"
    return None


def _source_data(
    volume: Volume, config_maps: Mapping[str, Mapping[str, Content]],
    secrets: Mapping[tuple[str, str], str],
) -> tuple[str, Mapping[str, Content] | None]:
    if volume.kind == CONFIG_MAP:
        name = str(volume.source.get("name", ""))
        return f"ConfigMap {name}", config_maps.get(name)
    name = str(volume.source.get("secretName", ""))
    data = {key: value for (secret, key), value in secrets.items() if secret == name}
    return f"Secret {name}", data or None


def _missing_source_advice(volume: Volume) -> str:
    if volume.kind == CONFIG_MAP:
        return "it is not among the rendered manifests"
    name = volume.source.get("secretName", "")
    return (f"supply its keys in the secrets file (--secrets FILE), one `{name}/KEY=VALUE` "
            "line per key")


def projected_files(
    volume: Volume,
    config_maps: Mapping[str, Mapping[str, Content]],
    secrets: Mapping[tuple[str, str], str],
) -> tuple[list[ProjectedFile], list[str]]:
    """The files of a configMap or secret volume, and the problems that prevent making them."""
    what, data = _source_data(volume, config_maps, secrets)
    optional = bool(volume.source.get("optional", False))
    if data is None:
        if optional:
            return [], []
        return [], [f"volume {volume.name} needs {what}, which is not available: "
                    f"{_missing_source_advice(volume)}"]
    default_mode = int(volume.source.get("defaultMode", DEFAULT_FILE_MODE))
    items: list[dict[str, Any]] | None = volume.source.get("items")
    if items is None:
        return [ProjectedFile(key, text, default_mode) for key, text in sorted(data.items())], []
    files: list[ProjectedFile] = []
    problems: list[str] = []
    for item in items:
        key, path = str(item.get("key", "")), str(item.get("path", ""))
        problem = relative_path_problem(path)
        if problem is not None:
            problems.append(f"volume {volume.name}: item path {path!r} {problem}")
        elif key not in data:
            if not optional:
                problems.append(f"volume {volume.name}: {what} has no key {key!r}")
        else:
            files.append(ProjectedFile(path, data[key], int(item.get("mode", default_mode))))
    return files, problems


def _sub_path_problem(volume: Volume, sub_path: str, files: list[ProjectedFile]) -> str | None:
    problem = relative_path_problem(sub_path)
    if problem is not None:
        return f"subPath {sub_path!r} {problem}"
    if volume.kind in (CONFIG_MAP, SECRET):
        inside = posixpath.normpath(sub_path)
        if not any(f.path == inside or f.path.startswith(inside + "/") for f in files):
            return f"subPath {sub_path!r} is not a file of volume {volume.name}"
    return None


def _mount_problems(container: Container, volumes: dict[str, Volume],
                    files: dict[str, list[ProjectedFile]]) -> list[str]:
    problems: list[str] = []
    for mount in container.volume_mounts:
        where = f"container {container.name}, mount {mount.mount_path}"
        volume = volumes.get(mount.volume_name)
        if volume is None:
            problems.append(f"{where}: there is no volume named {mount.volume_name}")
            continue
        if not mount.mount_path.startswith("/"):
            problems.append(f"{where}: the mount path must be absolute")
        if mount.sub_path:
            problem = _sub_path_problem(volume, mount.sub_path, files.get(volume.name, []))
            if problem is not None:
                problems.append(f"{where}: {problem}")
    return problems


def _name_problems(volume: Volume) -> list[str]:
    """A claim, ConfigMap or Secret the volume names by anything but a name (a path, say)."""
    from tfcompile.spec.problems import format_path

    return [f"volume {volume.name}: {format_path(problem.path)}: {problem.message}"
            for problem in volume_name_problems({volume.kind: volume.source})]


def claim_directory_problems(pod: Pod, claims_directory: Path | None) -> list[str]:
    """A claim's directory in a kept claims directory that is not a directory of its own (a
    link, say): run-local changes owners and modes in it, so it never follows one there."""
    if claims_directory is None:
        return []
    problems = []
    for volume in pod.volumes:
        name = volume.source.get("claimName")
        if volume.kind != CLAIM or not is_object_name(name):
            continue
        try:
            status = os.lstat(claims_directory / str(name))
        except FileNotFoundError:
            continue
        except OSError as error:
            problems.append(f"pod {pod.name}: volume {volume.name}: cannot look at "
                            f"{claims_directory / str(name)}: {error.strerror}")
            continue
        if not stat.S_ISDIR(status.st_mode):
            what = "a symbolic link" if stat.S_ISLNK(status.st_mode) else "not a directory"
            problems.append(f"pod {pod.name}: volume {volume.name}: the claim's directory "
                            f"{claims_directory / str(name)} is {what}; run-local follows no "
                            "link in the claims directory: make it a directory of its own")
    return problems


def volume_problems(pod: Pod, config_maps: Mapping[str, Mapping[str, Content]],
                    secrets: Mapping[tuple[str, str], str]) -> list[str]:
    """What in the pod's volumes and mounts would keep its containers from starting."""
    problems: list[str] = []
    volumes: dict[str, Volume] = {}
    files: dict[str, list[ProjectedFile]] = {}
    for volume in pod.volumes:
        volumes[volume.name] = volume
        named = _name_problems(volume)
        if named:
            problems += named
        elif volume.kind not in SUPPORTED_KINDS:
            problems.append(f"volume {volume.name}: {volume.kind} volumes are not supported by a "
                            f"local run (supported: {', '.join(SUPPORTED_KINDS)})")
        elif volume.kind in (CONFIG_MAP, SECRET):
            files[volume.name], found = projected_files(volume, config_maps, secrets)
            problems += found
    for container in [*pod.init_containers, *pod.containers]:
        problems += _mount_problems(container, volumes, files)
    return [f"pod {pod.name}: {problem}" for problem in problems]


@dataclass
class PodVolumes:
    """The host directory of each of a pod's volumes, and which ones are read-only."""

    directories: dict[str, Path] = field(default_factory=dict)
    kinds: dict[str, str] = field(default_factory=dict)
    read_only: set[str] = field(default_factory=set)


_SKIPPED = {errno.ELOOP, errno.ENOENT, errno.ENXIO, errno.EOPNOTSUPP}
"""A link (refused by O_NOFOLLOW), an entry gone meanwhile, a socket: left as they are."""


def _walk_without_links(directory: Path, visit: Callable[[int, os.stat_result], None]) -> None:
    """Call `visit` with an open descriptor and the status of `directory` and of every folder
    and regular file below it, each reached through its folder's descriptor without following a
    link: a link (anywhere, `directory` itself included), FIFO or socket is left as it is."""
    for _, _, files, folder in os.fwalk(directory, follow_symlinks=False):
        visit(folder, os.fstat(folder))
        for name in files:
            try:
                descriptor = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
                                     | os.O_CLOEXEC, dir_fd=folder)
            except OSError as error:
                if error.errno in _SKIPPED:
                    continue
                raise
            try:
                status = os.fstat(descriptor)
                if stat.S_ISREG(status.st_mode):
                    visit(descriptor, status)
            finally:
                os.close(descriptor)


def write_files(directory: Path, files: list[ProjectedFile]) -> None:
    """Write a configMap's, secret's or projected volume's files, each with its mode."""
    for projected in files:
        path = directory / projected.path
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(projected.text, bytes):
            path.write_bytes(projected.text)
        else:
            path.write_text(projected.text, encoding="utf-8")
        path.chmod(projected.mode & 0o7777)


def _share_with_group(directory: Path, group: int) -> None:
    """What the kubelet does to a volume for a pod's `fsGroup`: the group owns everything,
    may read and write it, and new files inherit the group (set-group-ID directories)."""

    def share(descriptor: int, status: os.stat_result) -> None:
        os.fchown(descriptor, -1, group)
        mode = status.st_mode & 0o7777
        os.fchmod(descriptor, mode | 0o2070 if stat.S_ISDIR(status.st_mode) else mode | 0o060)

    _walk_without_links(directory, share)


def claim_directory(claims_directory: Path, name: object) -> Path:
    """The directory of the claim `name`: one entry of the claims directory, never a path
    (`volume_problems` refuses such a name first; this refuses it again)."""
    if not is_object_name(name):
        raise OSError(errno.EINVAL, f"a claim name must be {NAME_RULE}")
    return claims_directory / str(name)


def _volume_directory(directory: Path) -> None:
    """Make `directory` for a volume, or take the one a kept claim has (keeping its owners);
    never a link, whoever made it."""
    try:
        status = os.lstat(directory)
    except FileNotFoundError:
        directory.mkdir(parents=True)
        return
    if not stat.S_ISDIR(status.st_mode):
        raise OSError(errno.ELOOP if stat.S_ISLNK(status.st_mode) else errno.ENOTDIR,
                      f"{directory} is not a directory of its own (a link or a file); "
                      "run-local follows no link to a volume")


def prepare_pod_volumes(pod: Pod, volumes_directory: Path, claims_directory: Path,
                        config_maps: Mapping[str, Mapping[str, Content]],
                        secrets: Mapping[tuple[str, str], str]) -> PodVolumes:
    """Create the host directories (and files) behind the pod's volumes."""
    prepared = PodVolumes()
    for volume in pod.volumes:
        if volume.kind == CLAIM:
            directory = claim_directory(claims_directory, volume.source.get("claimName"))
            if volume.source.get("readOnly"):
                prepared.read_only.add(volume.name)
        else:
            directory = volumes_directory / volume.name
        _volume_directory(directory)
        if volume.kind == EMPTY_DIRECTORY:
            directory.chmod(0o777)  # as the kubelet makes an emptyDir: any user may write
        elif volume.kind == CLAIM and fs_group(pod) is not None:
            _share_with_group(directory, fs_group(pod) or 0)
        if volume.kind in (CONFIG_MAP, SECRET):
            write_files(directory, projected_files(volume, config_maps, secrets)[0])
            prepared.read_only.add(volume.name)
        prepared.directories[volume.name] = directory
        prepared.kinds[volume.name] = volume.kind
    return prepared


def container_mounts(container: Container, volumes: PodVolumes) -> list[MountRequest]:
    """The volume mounts of one container, as host sources and container targets. A `subPath`
    stays apart from its volume's directory: it is resolved at every start without following a
    link (`sub_paths.resolved_source`), and made (as the kubelet does) in an emptyDir or a
    claim when it is missing."""
    requests: list[MountRequest] = []
    for mount in container.volume_mounts:
        source = volumes.directories[mount.volume_name]
        sub_path = posixpath.normpath(mount.sub_path) if mount.sub_path else ""
        create = bool(sub_path) and volumes.kinds[mount.volume_name] in (EMPTY_DIRECTORY, CLAIM)
        read_only = mount.read_only or mount.volume_name in volumes.read_only
        requests.append(MountRequest(str(source), mount.mount_path, read_only, sub_path,
                                     create))
    return requests
