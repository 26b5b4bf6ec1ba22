"""Advice for a field written where a job spec has none: which field to use instead, or why
tfcompile has none.

Most such fields come from a Kubeflow TFJob (kubeflow.org/v1, the training-operator's): someone
moving a job writes `runPolicy.backoffLimit`, `restartPolicy: OnFailure` or a `master` role where
they were. `TFJOB_FIELDS` is the one table of those fields, by the place they are written in
(under `spec`, under a role, or under `spec.scheduling`), each with its advice;
docs/migrating-from-tfjob.md maps the same fields side by side. Beside the table, three rules
follow from the models themselves: a pod's field (`nodeSelector`, `tolerations`: a TFJob keeps
them in its replicas' `template.spec`) belongs in a `podTemplate`, a field of a container in the
`tensorflow` container of one, and a field of the job under a role (or of a role under the job)
where it is defined.

Loaded only to explain a spec that was refused. Advice names fields, never the values written.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from .problems import FieldPath, escape_text

ROLE = "<role>"
"""In a place of the table: any key under `spec.roles` (a role, or a TFJob replica type)."""

MIGRATION_GUIDE = "docs/migrating-from-tfjob.md"

_RESTART_POLICY = (
    "tfcompile has no restartPolicy: the pods of a StatefulSet always restart, and "
    "spec.failurePolicy says when a failing task stops: TFJob's Never is {maxRestarts: 0}, "
    "ExitCode is doNotRetryExitCodes with the codes retrying will not fix (TFJob took 1-127), "
    "OnFailure and Always are the default (no failurePolicy: retried for ever) or a maxRestarts"
)
_CLEAN_POD_POLICY = (
    "tfcompile has no cleanPodPolicy: a job that has ended keeps its pods, idling, with their "
    "logs (the default, onSuccess: idle and onFailure: idle); spec.onSuccess: release scales "
    "the job's StatefulSets to zero once it has succeeded, and spec.onFailure: release once it "
    "has given up (both together are TFJob's All; Running has no equivalent, since the pods of "
    "a StatefulSet never complete); its objects stay as long as the job is in git"
)
_TTL = (
    "tfcompile has no ttlSecondsAfterFinished: the job's objects live as long as the job is in "
    "git (remove it, and Argo CD or Flux prunes them); spec.onSuccess: release frees the pods "
    "once it has succeeded, and spec.onFailure: release once it has given up"
)
_DEADLINE = (
    "use spec.deadline, a duration such as 1h or 48h (activeDeadlineSeconds: 3600 is "
    "deadline: 1h): a revision that trains longer is stopped and recorded as failed, and "
    "spec.onFailure: release frees its pods"
)
_BACKOFF_LIMIT = (
    "use spec.failurePolicy.maxRestarts: how often a task's command is restarted in its pod "
    "before the task stops (TFJob counted the restarts of the job's pods)"
)
_SCHEDULING_POLICY = (
    "use spec.scheduling: gang (volcano, coscheduling or kueue) schedules every pod of the job "
    "at once (TFJob's minAvailable, here always the whole job) and queue names the Volcano Queue "
    "or Kueue LocalQueue; priorityClass is podTemplate.spec.priorityClassName; minResources and "
    "scheduleTimeoutSeconds have no equivalent"
)
_MANAGED_BY = (
    "tfcompile has no managedBy: its output is StatefulSets and Services, which Kubernetes' own "
    "controllers manage; for Kueue set spec.scheduling.gang: kueue"
)
_SUCCESS_POLICY = (
    "tfcompile has no successPolicy: a job has succeeded when its chief has or, without a chief, "
    "when every worker has (TFJob's AllWorkers); for TFJob's default (the chief, else worker 0) "
    "give the job a chief"
)
_DYNAMIC_WORKER = (
    "tfcompile has no dynamic workers: change roles.worker.replicas in git, and every task "
    "restarts on the new TF_CONFIG together (the launcher's revision gate)"
)
_REPLICA_SPECS = (
    "TFJob's tfReplicaSpecs are spec.roles: Chief and Master become chief, Worker worker, PS ps, "
    "Evaluator evaluator; a replica's template becomes the role's podTemplate, and its "
    "tensorflow container's image, command, args, env and resources the role's own fields "
    f"({MIGRATION_GUIDE} maps every field)"
)
_RUN_POLICY = (
    "tfcompile has no runPolicy: suspend is spec.suspend, backoffLimit is "
    "spec.failurePolicy.maxRestarts, schedulingPolicy is spec.scheduling, activeDeadlineSeconds "
    "is spec.deadline, and cleanPodPolicy, ttlSecondsAfterFinished and managedBy have none "
    f"({MIGRATION_GUIDE})"
)
_TEMPLATE = (
    "TFJob's template is roles.{role}.podTemplate here; its tensorflow container's image, "
    "command, args, env and resources go in roles.{role}'s own fields"
)
_SCHEDULING = {
    "minAvailable": "tfcompile has no minAvailable: a gang is always every pod of the job",
    "priorityClass": "use podTemplate.spec.priorityClassName",
    "minResources": "tfcompile has no minResources: a gang is every pod of the job, with the "
                    "resources of its pods",
    "scheduleTimeoutSeconds": "tfcompile has no scheduleTimeoutSeconds: the gang scheduler's own "
                              "settings decide how long a gang waits",
}


@dataclass(frozen=True)
class Hint:
    """Advice for a field written at `place` (a field path; `ROLE` stands for any role)."""

    place: tuple[str, ...]
    advice: str


RUN_POLICY_FIELDS = {
    "cleanPodPolicy": _CLEAN_POD_POLICY,
    "ttlSecondsAfterFinished": _TTL,
    "activeDeadlineSeconds": _DEADLINE,
    "backoffLimit": _BACKOFF_LIMIT,
    "schedulingPolicy": _SCHEDULING_POLICY,
    "managedBy": _MANAGED_BY,
}
"""RunPolicy's fields that have no field of the same name here (its `suspend` has)."""

TFJOB_FIELDS: tuple[Hint, ...] = (
    Hint(("spec", "tfReplicaSpecs"), _REPLICA_SPECS),
    Hint(("spec", "runPolicy"), _RUN_POLICY),
    Hint(("spec", "successPolicy"), _SUCCESS_POLICY),
    Hint(("spec", "enableDynamicWorker"), _DYNAMIC_WORKER),
    *(Hint(("spec", "runPolicy", field), advice) for field, advice in RUN_POLICY_FIELDS.items()),
    Hint(("spec", "runPolicy", "suspend"), "use spec.suspend"),
    *(Hint(("spec", field), advice) for field, advice in RUN_POLICY_FIELDS.items()),
    Hint(("spec", "restartPolicy"), _RESTART_POLICY),
    Hint(("spec", "roles", ROLE, "restartPolicy"), _RESTART_POLICY),
    Hint(("spec", "roles", ROLE, "template"), _TEMPLATE),
    Hint(("spec", "roles", ROLE, "backoffLimit"), _BACKOFF_LIMIT),
    *(Hint(("spec", "scheduling", field), advice) for field, advice in _SCHEDULING.items()),
    Hint(("spec", "roles", "master"), "TFJob's Master is TensorFlow's chief: use roles.chief"),
    Hint(("spec", "roles", "Master"), "TFJob's Master is TensorFlow's chief: use roles.chief"),
    Hint(("spec", "roles", "Chief"), "roles are written in lower case: use roles.chief"),
    Hint(("spec", "roles", "Worker"), "roles are written in lower case: use roles.worker"),
    Hint(("spec", "roles", "PS"), "roles are written in lower case: use roles.ps"),
    Hint(("spec", "roles", "Evaluator"), "roles are written in lower case: use "
         "roles.evaluator"),
)
"""Every field of a TFJob (kubeflow.org/v1) that a job spec does not have, where a user moving a
job writes it: TFJobSpec's tfReplicaSpecs, runPolicy (its fields also written straight under
spec), successPolicy and enableDynamicWorker; a ReplicaSpec's template and restartPolicy (and
runPolicy's backoffLimit) under a role; SchedulingPolicy's fields under spec.scheduling; the
replica types as roles. Fields of a TFJob's pod templates follow the rules below."""

TFJOB_VALUES: dict[tuple[str, ...], tuple[str, str]] = {
    ("apiVersion",): ("kubeflow.org/v1", f"a Kubeflow TFJob's apiVersion ({MIGRATION_GUIDE} "
                      "maps a TFJob's fields to a TrainingJob's)"),
    ("kind",): ("TFJob", f"a Kubeflow TFJob's kind ({MIGRATION_GUIDE} maps a TFJob's fields to "
                "a TrainingJob's)"),
}
"""A TFJob's own apiVersion and kind, recognised (never repeated) in the message."""


def _matches(place: tuple[str, ...], path: FieldPath) -> bool:
    return len(place) == len(path) and all(
        (expected == ROLE and len(path) > 2 and path[:2] == ("spec", "roles"))
        or expected == part
        for expected, part in zip(place, path, strict=True))


def _table(path: FieldPath) -> str | None:
    found = next((hint.advice for hint in TFJOB_FIELDS if _matches(hint.place, path)), None)
    if found is not None and len(path) > 2 and path[:2] == ("spec", "roles"):
        found = found.replace("{role}", escape_text(str(path[2])))
    return found


def _model_fields() -> tuple[set[str], set[str]]:
    from .messages import allowed_fields  # imported here: messages imports this module
    from .models import JobSpec, Role

    return set(allowed_fields(JobSpec)), set(allowed_fields(Role))


def _kubernetes_fields() -> tuple[Mapping[str, str], set[str]]:
    """The pod's fields (with the advice for those a pod template may not set) and the
    container's, from Kubernetes' own schema."""
    from .pod_template import POD_FIELDS_OWNED, definition

    pod = {field: "" for field in definition("io.k8s.api.core.v1.PodSpec")["properties"]}
    pod.update(POD_FIELDS_OWNED)
    return pod, set(definition("io.k8s.api.core.v1.Container")["properties"])


def _rules(path: FieldPath) -> str | None:
    """Advice that follows from the models and Kubernetes' schema, for a field written under
    spec, under a role, or straight under a podTemplate (beside metadata and spec)."""
    field = str(path[-1])
    parent = path[:-1]
    in_role = len(parent) == 3 and parent[:2] == ("spec", "roles")
    in_template = bool(parent) and parent[-1] == "podTemplate"
    if parent != ("spec",) and not in_role and not in_template:
        return None
    pod, container = _kubernetes_fields()
    if pod.get(field):
        return f"a pod template may not set {field}: {pod[field]}"
    if in_template:
        return (f"a pod's field belongs under spec: {_shown(parent)}.spec.{field}"
                if field in pod else None)
    job_fields, role_fields = _model_fields()
    template = (f"roles.{escape_text(str(parent[2]))}.podTemplate" if in_role
                else "spec.podTemplate")
    if in_role and field in job_fields:
        return f"{field} is the job's, for every role: spec.{field}"
    if not in_role and field in role_fields:
        return f"{field} is a role's: roles.<role>.{field} (for example roles.worker.{field})"
    if field in pod:
        return f"a pod's field: put it in {template}.spec.{field}"
    if field in container and field != "name":
        return (f"a container's field: put it in {template}.spec.containers, in the container "
                f"named tensorflow ([{{name: tensorflow, {field}: ...}}])")
    return None


def _shown(path: FieldPath) -> str:
    return ".".join(escape_text(str(part)) for part in path)


def advice(path: FieldPath) -> str | None:
    """What to write instead of the unknown field at `path`, or None."""
    return _table(path) or _rules(path)


def value_advice(path: FieldPath, value: Any) -> str | None:
    """What a TFJob's apiVersion or kind written at `path` means, or None."""
    expected = TFJOB_VALUES.get(tuple(str(part) for part in path))
    return expected[1] if expected is not None and value == expected[0] else None


def unknown_field_hints(path: FieldPath, value: Any) -> Iterator[tuple[FieldPath, str]]:
    """Advice for an unknown field at `path` holding `value`: for a mapping whose own fields
    the table knows (`runPolicy: {backoffLimit: 3}`), advice for each of those fields; else for
    the field itself, if any."""
    found = advice(path)
    if isinstance(value, Mapping):
        children = [((*path, str(key)), _table((*path, str(key)))) for key in value]
        if any(advised is not None for _, advised in children):
            for child, advised in children:
                child_advice = advised or (found and f"not a field of TFJob's either; {found}")
                if child_advice:
                    yield child, child_advice
            return
    if found is not None:
        yield path, found
