"""The user and groups a container runs as, from its pod's and its own `securityContext`.

A cluster runs a container as `runAsUser`/`runAsGroup` (the container's own, else the pod's),
with `fsGroup` and `supplementalGroups` as supplementary groups, and a volume a pod shares
(a claim) is made group-writable for `fsGroup`. `run-local` does the same, so a job that
writes where a non-root user cannot fails here first, not after the sync. Without `runAsUser`
the image's user applies; images are not pulled here, so that is root.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tfcompile.compiler.rendering.pods import Pod


@dataclass(frozen=True)
class Identity:
    """What the container's process becomes before it runs the command."""

    user: int
    group: int
    groups: tuple[int, ...]
    no_new_privileges: bool


def _context(node: Mapping[str, Any]) -> Mapping[str, Any]:
    context = node.get("securityContext")
    return context if isinstance(context, Mapping) else {}


def _raw_container(pod: Pod, name: str) -> Mapping[str, Any]:
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
    context = _context(_raw_container(pod, container_name))
    user = _integer(context.get("runAsUser", pod_context.get("runAsUser"))) or 0
    group = _integer(context.get("runAsGroup", pod_context.get("runAsGroup"))) or 0
    groups = [group]
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
