"""Objects the rendered pods use but the job does not create: Secrets, ConfigMaps, claims,
service accounts, priority classes and gang-scheduling queues.

The compiler never emits secret values, so a job that reads credentials depends on Secrets
someone creates by other means; a pod whose Secret is missing hangs in
`CreateContainerConfigError`. Listing these lets a user create them before the first sync. A
reference to a key the rendered ConfigMap or Secret lacks is a real problem, since nothing
outside the job can fix it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tfcompile.compiler.rendering.manifests import (
    KubernetesObject,
    name_of,
    namespace_of,
    object_reference,
)
from tfcompile.compiler.rendering.pods import environment_sources

from .report import ObjectProblem, Prerequisite

_TEMPLATE_KINDS = ("StatefulSet", "Deployment", "DaemonSet", "ReplicaSet", "Job")


@dataclass(frozen=True)
class _Reference:
    kind: str
    name: str
    key: str | None
    optional: bool
    used_by: str
    namespace: str | None


def prerequisites_of(
    objects: Sequence[KubernetesObject],
) -> tuple[list[Prerequisite], list[ObjectProblem]]:
    """What the workloads need that the manifests do not create, and references to absent keys."""
    created = {(str(item.get("kind")), namespace_of(item), name_of(item)) for item in objects}
    grouped: dict[tuple[str, str | None, str], list[_Reference]] = {}
    problems: list[ObjectProblem] = []
    for reference in _references(objects):
        identity = (reference.kind, reference.namespace, reference.name)
        if identity in created:
            problem = _missing_key(reference, objects)
            if problem is not None and problem not in problems:
                problems.append(problem)
            continue
        grouped.setdefault(identity, []).append(reference)
    prerequisites = [
        Prerequisite(
            kind=kind,
            name=name,
            namespace=namespace,
            used_by=tuple(sorted({reference.used_by for reference in references})),
            keys=tuple(sorted({reference.key for reference in references if reference.key})),
            optional=all(reference.optional for reference in references),
        )
        for (kind, namespace, name), references in grouped.items()
    ]
    return sorted(prerequisites, key=lambda item: (item.kind, item.name)), problems


def _missing_key(reference: _Reference,
                 objects: Sequence[KubernetesObject]) -> ObjectProblem | None:
    if reference.key is None or reference.optional or reference.kind not in ("ConfigMap", "Secret"):
        return None
    sources = environment_sources(objects, reference.namespace)
    if reference.kind == "ConfigMap":
        present = reference.key in sources.config_maps.get(reference.name, {})
    else:
        present = (reference.name, reference.key) in sources.secrets
    if present:
        return None
    return ObjectProblem(
        reference.used_by,
        f"it reads key {reference.key!r} of {reference.kind}/{reference.name}, which the "
        f"rendered {reference.kind} does not have: the container would not start "
        "(CreateContainerConfigError); add the key or mark the reference optional",
    )


_KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


def _scheduling_references(
    kubernetes_object: KubernetesObject, pod_spec: Mapping[str, Any] | None,
) -> Iterator[tuple[str, str, bool]]:
    """(kind, name, namespaced) of a PriorityClass, a Kueue LocalQueue or a Volcano Queue."""
    if pod_spec is not None and pod_spec.get("priorityClassName"):
        yield "PriorityClass", str(pod_spec["priorityClassName"]), False
    if pod_spec is not None:
        template = (kubernetes_object.get("spec") or {}).get("template") or {}
        queue = ((template.get("metadata") or {}).get("labels") or {}).get(_KUEUE_QUEUE_LABEL)
        if queue:
            yield "LocalQueue", str(queue), True
    if (kubernetes_object.get("kind") == "PodGroup"
            and str(kubernetes_object.get("apiVersion", "")).startswith("scheduling.volcano.sh/")):
        queue = (kubernetes_object.get("spec") or {}).get("queue")
        if queue:
            yield "Queue", str(queue), False


def _references(objects: Sequence[KubernetesObject]) -> Iterator[_Reference]:
    for kubernetes_object in objects:
        namespace = namespace_of(kubernetes_object)
        for kind, name, namespaced in _scheduling_references(
                kubernetes_object, _pod_spec(kubernetes_object)):
            yield _Reference(kind, name, None, False, object_reference(kubernetes_object),
                             namespace if namespaced else None)
        pod_spec = _pod_spec(kubernetes_object)
        if pod_spec is None:
            continue
        owner = object_reference(kubernetes_object)
        namespace = namespace_of(kubernetes_object)
        for kind, name, key, optional in _pod_spec_references(pod_spec):
            if name:
                yield _Reference(kind, name, key, optional, owner, namespace)


def _pod_spec(kubernetes_object: KubernetesObject) -> Mapping[str, Any] | None:
    kind = kubernetes_object.get("kind")
    spec = kubernetes_object.get("spec") or {}
    if kind in _TEMPLATE_KINDS:
        return (spec.get("template") or {}).get("spec")
    if kind == "CronJob":
        job_spec = (spec.get("jobTemplate") or {}).get("spec") or {}
        return (job_spec.get("template") or {}).get("spec")
    if kind == "Pod":
        return spec
    return None


def _pod_spec_references(
    pod_spec: Mapping[str, Any],
) -> Iterator[tuple[str, str, str | None, bool]]:
    containers = [*(pod_spec.get("initContainers") or []), *(pod_spec.get("containers") or [])]
    for container in containers:
        for source in container.get("envFrom") or []:
            for field, kind in (("configMapRef", "ConfigMap"), ("secretRef", "Secret")):
                if source.get(field) is not None:
                    reference = source[field]
                    yield (
                        kind,
                        str(reference.get("name", "")),
                        None,
                        bool(reference.get("optional")),
                    )
        for entry in container.get("env") or []:
            value_from = entry.get("valueFrom") or {}
            for field, kind in (("configMapKeyRef", "ConfigMap"), ("secretKeyRef", "Secret")):
                if value_from.get(field) is not None:
                    selector = value_from[field]
                    yield (
                        kind,
                        str(selector.get("name", "")),
                        str(selector.get("key", "")),
                        bool(selector.get("optional")),
                    )
    for volume in pod_spec.get("volumes") or []:
        yield from _volume_references(volume)
    for pull_secret in pod_spec.get("imagePullSecrets") or []:
        yield "Secret", str(pull_secret.get("name", "")), None, True
    account = pod_spec.get("serviceAccountName") or pod_spec.get("serviceAccount")
    if account and account != "default":
        yield "ServiceAccount", str(account), None, False


def _volume_references(volume: Mapping[str, Any]) -> Iterator[tuple[str, str, str | None, bool]]:
    if volume.get("secret") is not None:
        secret = volume["secret"]
        yield "Secret", str(secret.get("secretName", "")), None, bool(secret.get("optional"))
    if volume.get("configMap") is not None:
        config_map = volume["configMap"]
        yield "ConfigMap", str(config_map.get("name", "")), None, bool(config_map.get("optional"))
    if volume.get("persistentVolumeClaim") is not None:
        claim = volume["persistentVolumeClaim"]
        yield "PersistentVolumeClaim", str(claim.get("claimName", "")), None, False
    for projection in (volume.get("projected") or {}).get("sources") or []:
        for field, kind in (("secret", "Secret"), ("configMap", "ConfigMap")):
            if projection.get(field) is not None:
                source = projection[field]
                yield kind, str(source.get("name", "")), None, bool(source.get("optional"))
