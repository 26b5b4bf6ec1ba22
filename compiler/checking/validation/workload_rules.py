"""What the rendered workloads must keep of tfcompile's: pods that restart, and the launcher.

A StatefulSet's (or Deployment's) pods must have `restartPolicy: Always` and no
`activeDeadlineSeconds`; the API server refuses anything else, yet the JSON schema allows it, so
a patch that sets `OnFailure` passes every other check: both are checked on the rendered objects
of every job. The `tensorflow` container of a role
runs tfcompile's launcher, which records success and failure, applies `failurePolicy` and
`deadline`, and holds the revision gate (ARCHITECTURE.md); a component that replaces its command
trains without any of that, and nothing else would notice (`component_conflicts.py` finds it by
comparing with the compiled output, so output compiled by another tfcompile is not judged by
this one's launcher). The messages are here, for both.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from tfcompile.compiler.objects.labels import ROLE_LABEL
from tfcompile.compiler.rendering.manifests import KubernetesObject, object_reference

from .report import ObjectProblem, quoted

ALWAYS_RESTARTING_KINDS = ("StatefulSet", "Deployment", "DaemonSet", "ReplicaSet")
TENSORFLOW_CONTAINER = "tensorflow"


def pod_spec(kubernetes_object: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The pod spec of a workload's template (`spec.template.spec`), or None."""
    if kubernetes_object.get("kind") not in (*ALWAYS_RESTARTING_KINDS, "Job"):
        return None
    node: Any = kubernetes_object
    for part in ("spec", "template", "spec"):
        node = node.get(part) if isinstance(node, Mapping) else None
    return node if isinstance(node, Mapping) else None


def restart_policy(kubernetes_object: Mapping[str, Any]) -> str | None:
    """The restart policy of an always-restarting workload's pods (`Always` when unset)."""
    spec = pod_spec(kubernetes_object)
    if spec is None or kubernetes_object.get("kind") not in ALWAYS_RESTARTING_KINDS:
        return None
    return str(spec.get("restartPolicy") or "Always")


def is_role(kubernetes_object: Mapping[str, Any]) -> bool:
    """A StatefulSet tfcompile compiled for a TensorFlow role."""
    metadata = kubernetes_object.get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, Mapping) else None
    return (kubernetes_object.get("kind") == "StatefulSet" and isinstance(labels, Mapping)
            and ROLE_LABEL in labels)


def restart_policy_problem(reference: str, kind: str, policy: str,
                           component: str | None = None) -> ObjectProblem:
    who = f"component {component} sets " if component else ""
    launcher = ("tfcompile's launcher already stops a task that succeeded or gave up "
                "(onSuccess, failurePolicy), so " if kind == "StatefulSet" else "")
    return ObjectProblem(
        reference,
        f"{who}restartPolicy {quoted(policy)}: a {kind}'s pods must restart Always (the API "
        f"server refuses anything else); {launcher}leave restartPolicy out",
    )


def launcher_problem(reference: str, component: str, launcher: Sequence[str]) -> ObjectProblem:
    return ObjectProblem(
        reference,
        f"component {component} replaces the command of container {TENSORFLOW_CONTAINER}: "
        f"without the launcher ({' '.join(launcher)}) no success or failure is recorded, and "
        "failurePolicy, deadline, onSuccess and the revision gate do not apply; set the "
        "training command with `command` and `args` in job.yaml",
    )


def arguments_problem(reference: str, component: str) -> ObjectProblem:
    return ObjectProblem(
        reference,
        f"component {component} replaces the args of container {TENSORFLOW_CONTAINER}, the "
        "training command tfcompile's launcher runs: set it with `command` and `args` in "
        "job.yaml (or a role's), where the revision and the review see it",
    )


def workload_problems(objects: Sequence[KubernetesObject]) -> Iterator[ObjectProblem]:
    """Workloads whose pods would not restart, or would be stopped by a deadline."""
    for item in objects:
        policy = restart_policy(item)
        if policy is None:
            continue
        kind = str(item.get("kind"))
        if policy != "Always":
            yield restart_policy_problem(object_reference(item), kind, policy)
        spec = pod_spec(item)
        if spec is not None and spec.get("activeDeadlineSeconds") is not None:
            instead = "use `deadline` in job.yaml" if is_role(item) else "leave it out"
            yield ObjectProblem(
                object_reference(item),
                f"activeDeadlineSeconds: a {kind}'s pods cannot have one (the API server "
                f"refuses it); {instead}",
            )
