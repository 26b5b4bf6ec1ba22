"""What a job's pods may do on a cluster too old for the launcher policy.

A job's Role lets its pods patch their job's state ConfigMap and, with `onSuccess` or `onFailure:
release`, the scale of its StatefulSets; the launcher policy that `init` writes
(ValidatingAdmissionPolicy, Kubernetes 1.30 and later) holds them to their own task's record and
to scaling to 0. A cluster older than that has no such policy, so there the Role is all there is:
`validate` says so for each job, for the Kubernetes version it checks against.
"""

from __future__ import annotations

from tfcompile.compiler.kubernetes_versions import ADMISSION_POLICY_KUBERNETES_VERSION
from tfcompile.compiler.objects.labels import LAUNCHER_COMPONENT, MANAGED_BY
from tfcompile.compiler.objects.names import LAUNCHER_POLICY_FILE
from tfcompile.compiler.rendering.manifests import KubernetesObject, object_reference

_SCALE = "statefulsets/scale"


def _version(text: str) -> tuple[int, int]:
    major, minor = text.split(".")
    return int(major), int(minor)


def _launcher_roles(objects: list[KubernetesObject]) -> list[KubernetesObject]:
    found = []
    for kubernetes_object in objects:
        labels = (kubernetes_object.get("metadata") or {}).get("labels") or {}
        if (kubernetes_object.get("kind") == "Role"
                and labels.get("app.kubernetes.io/managed-by") == MANAGED_BY
                and labels.get("app.kubernetes.io/component") == LAUNCHER_COMPONENT):
            found.append(kubernetes_object)
    return found


def _scales(role: KubernetesObject) -> bool:
    return any(_SCALE in (rule.get("resources") or []) for rule in role.get("rules") or []
               if isinstance(rule, dict))


def launcher_rights_notes(objects: list[KubernetesObject], version: str) -> list[str]:
    """One note per launcher Role when `version` is older than the launcher policy."""
    if _version(version) >= _version(ADMISSION_POLICY_KUBERNETES_VERSION):
        return []
    notes = []
    for role in _launcher_roles(objects):
        scale = (" and, since it releases itself (onSuccess or onFailure: release), scale the "
                 "job's StatefulSets to any number of replicas" if _scales(role) else "")
        notes.append(
            f"{object_reference(role)}: Kubernetes {version} serves no ValidatingAdmissionPolicy "
            f"of admissionregistration.k8s.io/v1 (GA in {ADMISSION_POLICY_KUBERNETES_VERSION}), "
            "so the launcher policy "
            f"({LAUNCHER_POLICY_FILE}) cannot be enforced there: a pod's token may write "
            f"any task's record in the job's state{scale}"
        )
    return notes
