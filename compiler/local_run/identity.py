"""The user and groups a container runs as, from its pod's and its own `securityContext`.

A cluster runs a container as `runAsUser`/`runAsGroup` (the container's own, else the pod's),
with `fsGroup` and `supplementalGroups` as supplementary groups, and a volume a pod shares
(a claim) is made group-writable for `fsGroup`. `run-local` does the same, so a job that
writes where a non-root user cannot fails here first, not after the sync. Without `runAsUser`
the image's user applies (its USER, or root), and without `runAsGroup` that user's group, as
the container runtime of a node decides.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tfcompile.compiler.rendering.pods import Pod


@dataclass(frozen=True)
class Identity:
    """What the container's process becomes before it runs the command: None leaves the user
    (or group) to the image; `groups` are the supplementary groups."""

    user: int | None
    group: int | None
    groups: tuple[int, ...]
    no_new_privileges: bool


def _context(node: Mapping[str, Any]) -> Mapping[str, Any]:
    context = node.get("securityContext")
    return context if isinstance(context, Mapping) else {}


def raw_container(pod: Pod, name: str) -> Mapping[str, Any]:
    """The rendered container (or init container) `name` of the pod; empty when absent."""
    for kind in ("initContainers", "containers"):
        for container in pod.spec.get(kind) or []:
            if isinstance(container, Mapping) and container.get("name") == name:
                return container
    return {}


def _integer(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def fs_group(pod: Pod) -> int | None:
    """The group a pod's shared volumes belong to, if the pod names one."""
    return _integer(_context(pod.spec).get("fsGroup"))


def identity_of(pod: Pod, container_name: str) -> Identity:
    pod_context = _context(pod.spec)
    context = _context(raw_container(pod, container_name))
    user = _integer(context.get("runAsUser", pod_context.get("runAsUser")))
    group = _integer(context.get("runAsGroup", pod_context.get("runAsGroup")))
    groups = [] if group is None else [group]
    shared = fs_group(pod)
    if shared is not None:
        groups.append(shared)
    groups.extend(value for value in pod_context.get("supplementalGroups") or []
                  if _integer(value) is not None)
    return Identity(
        user=user,
        group=group,
        groups=tuple(dict.fromkeys(groups)),
        no_new_privileges=context.get("allowPrivilegeEscalation") is False,
    )
