"""The user namespace a local run's containers enter, so that they run as no user of this machine.

A container runs as the user its pod asks for (`identity`), but outside a user namespace that
number means a user of the host: uid 1000 is usually a person, and a pod running as 1000 could
read that person's private files. So, as Kubernetes maps a pod with `hostUsers: false`,
container IDs 0-65535 map to a range of host IDs that belong to nobody: the first range of 65536
IDs from 0x70000000 (1879048192, a block systemd leaves unused) that holds no user or group of
this machine (`pwd` and `grp`, which read /etc/passwd, /etc/group and whatever else the system's
name service lists) and overlaps no subordinate range (/etc/subuid, /etc/subgid). It stays the
same from run to run while those do not change, so a kept claim directory (`--claims-directory`)
keeps its owners; every run and the local node share it.

Root inside the namespace is root only there: the namespace owns none of the pod's other
namespaces (network, UTS, mount and PID are made by the host's root), so its capabilities reach
only files owned by IDs of the range. A host file owned by a real user is "others" to every
container: readable only when everyone may read it.
"""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tfcompile.compiler.rendering.pods import Pod

from .identity import identity_of
from .namespace_holder import USER
from .network import release_holder, start_holder, wait_ready

RANGE_SIZE = 65536
FIRST_CANDIDATE = 0x70000000
LAST_CANDIDATE = 0x7FFF0000 - RANGE_SIZE  # IDs stay below 2**31: some tools read them signed
SUBORDINATE_FILES = (Path("/etc/subuid"), Path("/etc/subgid"))


@dataclass(frozen=True)
class IdRange:
    """Container IDs 0 to size - 1 are host IDs start to start + size - 1 (users and groups)."""

    start: int
    size: int = RANGE_SIZE

    def host_id(self, container_id: int) -> int:
        if not 0 <= container_id < self.size:
            raise ValueError(f"ID {container_id} is outside 0-{self.size - 1}")
        return self.start + container_id

    def map_text(self) -> str:
        """The line for /proc/PID/uid_map and gid_map."""
        return f"0 {self.start} {self.size}\n"

    def describe(self) -> str:
        return f"{self.start}-{self.start + self.size - 1}"


def _subordinate_ranges(path: Path) -> list[tuple[int, int]]:
    """`name:start:count` lines of /etc/subuid or /etc/subgid as (start, end) pairs."""
    ranges = []
    with contextlib.suppress(OSError):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            parts = line.strip().split(":")
            if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
                ranges.append((int(parts[1]), int(parts[1]) + int(parts[2])))
    return ranges


def taken_ranges() -> list[tuple[int, int]]:
    """Every host user and group ID in use, and every subordinate range, as [start, end)."""
    users = pwd.getpwall()
    taken = [(entry.pw_uid, entry.pw_uid + 1) for entry in users]
    taken += [(entry.pw_gid, entry.pw_gid + 1) for entry in users]
    taken += [(entry.gr_gid, entry.gr_gid + 1) for entry in grp.getgrall()]
    for path in SUBORDINATE_FILES:
        taken += _subordinate_ranges(path)
    return taken


def unused_range(taken: Iterable[tuple[int, int]] | None = None) -> IdRange | None:
    """The first candidate range that no taken ID or range overlaps; None when there is none.
    Candidates start at FIRST_CANDIDATE and every RANGE_SIZE IDs after it."""
    start = FIRST_CANDIDATE
    for span_start, span_end in sorted(taken_ranges() if taken is None else taken):
        if span_end <= start:
            continue
        if span_start >= start + RANGE_SIZE:
            break
        start = FIRST_CANDIDATE + -(-(span_end - FIRST_CANDIDATE) // RANGE_SIZE) * RANGE_SIZE
    return IdRange(start) if start <= LAST_CANDIDATE else None


def id_problems(pods: Sequence[Pod]) -> list[str]:
    """Containers whose user or groups lie outside the mapped IDs, or no range at all."""
    problems: list[str] = []
    if unused_range() is None:
        problems.append(f"no range of {RANGE_SIZE} host user and group IDs from "
                        f"{FIRST_CANDIDATE} up is free of users, groups and subordinate ranges "
                        "(/etc/subuid, /etc/subgid) of this machine, so pods cannot run as "
                        "nobody of it")
    for pod in pods:
        for container in [*pod.init_containers, *pod.containers]:
            identity = identity_of(pod, container.name)
            ids = {"user": [identity.user], "group": [identity.group],
                   "supplementary group": list(identity.groups)}
            for what, values in ids.items():
                for value in values:
                    if not 0 <= value < RANGE_SIZE:
                        problems.append(
                            f"pod {pod.name}, container {container.name}: {what} {value} is "
                            f"outside 0-{RANGE_SIZE - 1}, the IDs a local run maps into its "
                            "user namespace (as Kubernetes maps a pod with hostUsers: false)")
    return problems


@dataclass
class UserNamespace:
    """An open user namespace (`descriptor`) mapping `ids`; `close` releases it (its processes
    keep it alive until they end)."""

    ids: IdRange
    descriptor: int

    def close(self) -> None:
        if self.descriptor >= 0:
            with contextlib.suppress(OSError):
                os.close(self.descriptor)
            self.descriptor = -1


def create_user_namespace(ids: IdRange) -> UserNamespace:
    """A new user namespace mapping container IDs 0 to ids.size - 1 onto `ids`."""
    holder = start_holder(USER)
    try:
        wait_ready(holder, "a user namespace")
        for kind in ("uid_map", "gid_map"):
            with open(f"/proc/{holder.pid}/{kind}", "w", encoding="ascii") as stream:
                stream.write(ids.map_text())
        return UserNamespace(ids, os.open(f"/proc/{holder.pid}/ns/user",
                                          os.O_RDONLY | os.O_CLOEXEC))
    finally:
        release_holder(holder)
