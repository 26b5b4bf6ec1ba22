"""Length and size limits that Kubernetes enforces only at sync time or at pod creation.

The compiler refuses names and sizes beyond these limits, but an overlay (a `namePrefix`, a big
patch) can push the rendered result past them; the API server or the StatefulSet controller then
fails long after CI was green.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from tfcompile.compiler.objects.names import (
    DNS_LABEL_MAXIMUM,
    ENVIRONMENT_STRING_MAXIMUM,
    STATEFULSET_NAME_MAXIMUM,
)
from tfcompile.compiler.rendering.manifests import (
    KubernetesObject,
    name_of,
    object_reference,
    objects_of_kind,
)
from tfcompile.compiler.rendering.pods import Pod

from .report import ObjectProblem

DNS_LABEL_LIMIT = DNS_LABEL_MAXIMUM
STATEFUL_SET_NAME_LIMIT = STATEFULSET_NAME_MAXIMUM
ENVIRONMENT_STRING_LIMIT = ENVIRONMENT_STRING_MAXIMUM
# The API server's limit on all annotations of an object together (256 KiB).
ANNOTATIONS_SIZE_LIMIT = 262144
LAST_APPLIED_ANNOTATION = "kubectl.kubernetes.io/last-applied-configuration"
# The API server refuses a ConfigMap whose data is larger than 1 MiB.
CONFIG_MAP_SIZE_LIMIT = 1048576


def name_problems(objects: Iterable[KubernetesObject], pods: Iterable[Pod]) -> list[ObjectProblem]:
    """StatefulSet names over 52 characters, Service and pod names over 63."""
    problems: list[ObjectProblem] = []
    objects = list(objects)
    for stateful_set in objects_of_kind(objects, "StatefulSet"):
        name = name_of(stateful_set)
        if len(name) > STATEFUL_SET_NAME_LIMIT:
            problems.append(
                ObjectProblem(
                    object_reference(stateful_set),
                    f"the name has {len(name)} characters, more than {STATEFUL_SET_NAME_LIMIT}: "
                    f"its pods' controller-revision-hash label ({name}-<hash>) would exceed the "
                    f"{DNS_LABEL_LIMIT}-character label limit and the controller cannot create "
                    "them; shorten the job or role name, or the namePrefix/nameSuffix added to it",
                )
            )
    for service in objects_of_kind(objects, "Service"):
        name = name_of(service)
        if len(name) > DNS_LABEL_LIMIT:
            problems.append(
                ObjectProblem(
                    object_reference(service),
                    f"the name has {len(name)} characters, more than the {DNS_LABEL_LIMIT} of a "
                    "DNS label; shorten the job or role name, or the namePrefix/nameSuffix",
                )
            )
    for pod in pods:
        if len(pod.name) > DNS_LABEL_LIMIT:
            problems.append(
                ObjectProblem(
                    f"{pod.owner_kind}/{pod.owner_name}",
                    f"pod {pod.name} has a {len(pod.name)}-character name, more than the "
                    f"{DNS_LABEL_LIMIT} of a DNS label (it is the pod's hostname); "
                    "shorten the job or role name",
                )
            )
    return problems


def size_problems(objects: Iterable[KubernetesObject]) -> list[ObjectProblem]:
    """Objects too big for client-side apply, and ConfigMaps over the API server's 1 MiB."""
    problems: list[ObjectProblem] = []
    for kubernetes_object in objects:
        size = last_applied_size(kubernetes_object)
        if size > ANNOTATIONS_SIZE_LIMIT:
            problems.append(
                ObjectProblem(
                    object_reference(kubernetes_object),
                    f"its annotations would be {size} bytes with the {LAST_APPLIED_ANNOTATION} "
                    f"annotation that client-side `kubectl apply` adds, more than the "
                    f"{ANNOTATIONS_SIZE_LIMIT} bytes the API server allows; apply it with "
                    "server-side apply (`kubectl apply --server-side`, or the Argo CD sync option "
                    "`ServerSideApply=true`) or make it smaller",
                )
            )
        if kubernetes_object.get("kind") == "ConfigMap":
            data_size = sum(
                len(str(key).encode()) + len(str(value).encode())
                for section in ("data", "binaryData")
                for key, value in (kubernetes_object.get(section) or {}).items()
            )
            if data_size > CONFIG_MAP_SIZE_LIMIT:
                problems.append(
                    ObjectProblem(
                        object_reference(kubernetes_object),
                        f"its data is {data_size} bytes, more than the {CONFIG_MAP_SIZE_LIMIT} "
                        "a ConfigMap may hold; ship large files in the image or on a volume",
                    )
                )
    return problems


def last_applied_size(kubernetes_object: KubernetesObject) -> int:
    """Bytes all annotations take once `kubectl apply` records the object in an annotation."""
    metadata = kubernetes_object.get("metadata") or {}
    annotations = {
        str(key): str(value)
        for key, value in (metadata.get("annotations") or {}).items()
        if key != LAST_APPLIED_ANNOTATION
    }
    recorded = json.dumps(kubernetes_object, separators=(",", ":"), ensure_ascii=False) + "\n"
    return (
        sum(len(key.encode()) + len(value.encode()) for key, value in annotations.items())
        + len(LAST_APPLIED_ANNOTATION.encode())
        + len(recorded.encode())
    )


def environment_string_size(name: str, value: str) -> int:
    """Bytes `NAME=value` takes in a process's environment, with its terminating NUL."""
    return len(name.encode()) + 1 + len(value.encode()) + 1
