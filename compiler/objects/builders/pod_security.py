"""Secure defaults of every pod tfcompile generates: Pod Security "restricted" unless the job says
otherwise.

A training pod needs no root, no privilege escalation, no capabilities and no Kubernetes API
token, so it gets none: a namespace enforcing the "restricted" Pod Security level admits it, and a
compromised script can do less. A job that must run as root says so in `podTemplate` (its
`securityContext` merges over these), and `validate` reports the level its pods then meet.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .pod_template import merge_maps

RUN_AS_USER = 1000
RUN_AS_GROUP = 1000
FS_GROUP = 1000
"""The shared claim is group-writable for this group (the kubelet applies fsGroup), so every role
can write checkpoints to it."""

HOME_VOLUME = "tfcompile-home"
HOME_DIRECTORY = "/opt/tfcompile/home"
TMP_VOLUME = "tfcompile-tmp"
TMP_DIRECTORY = "/tmp"
"""A non-root user of a stock TensorFlow image has no writable home (Keras writes ~/.keras) and
the image's /tmp may be read-only under a hardened runtime: both are emptyDirs."""


def pod_security_context() -> dict[str, Any]:
    return {
        "runAsNonRoot": True,
        "runAsUser": RUN_AS_USER,
        "runAsGroup": RUN_AS_GROUP,
        "fsGroup": FS_GROUP,
        "fsGroupChangePolicy": "OnRootMismatch",
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def container_security_context() -> dict[str, Any]:
    return {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def secure_containers(pod_spec: Mapping[str, Any]) -> dict[str, Any]:
    """`pod_spec` with the secure container defaults under every container's own
    `securityContext` (sidecars and init containers included; what a container says wins)."""
    secured = dict(pod_spec)  # copied down to the containers only: a job's env can be large
    for kind in ("initContainers", "containers"):
        if secured.get(kind):
            secured[kind] = [
                {**container, "securityContext": merge_maps(
                    container_security_context(), container.get("securityContext") or {})}
                for container in secured[kind]
            ]
    return secured


def settle_token(pod_spec: dict[str, Any], fragments: Sequence[Mapping[str, Any]]) -> None:
    """No service-account token unless the job names a service account (then Kubernetes'
    default, a mounted token) or sets `automountServiceAccountToken` itself."""
    specs = [fragment.get("spec") or {} for fragment in fragments]
    if any("automountServiceAccountToken" in spec for spec in specs):
        return
    if any(spec.get("serviceAccountName") or spec.get("serviceAccount") for spec in specs):
        pod_spec.pop("automountServiceAccountToken", None)
