"""The launcher's rights: its state ConfigMap, a ServiceAccount, a Role and a RoleBinding.

Success and failure must outlive a pod (a pod recreated after success must not train again, with
or without shared storage), so the launchers record them in one ConfigMap per job, `J-state`.
tfcompile writes it without `data`, so Argo CD and Flux never own (or reset) what the launchers
record; its annotations say which revision is committed and which tasks make the job succeed,
which is what `tfcompile status` and the Argo CD health check read.

The Role grants the least that does this, always by name: get and patch of `J-state`; with
`onSuccess: release` or `onFailure: release`, also get and patch of the `scale` of the job's own
StatefulSets. Nothing else: no create, no delete, no other object, no pods. Which key a pod may
write and to how many replicas it may scale, RBAC cannot say: the cluster's launcher policy does
(`launcher_policy.py`).
"""

from __future__ import annotations

from typing import Any

from tfcompile.spec.models import TrainingJob
from tfcompile.spec.sweep import Trial

from ..labels import (
    JOB_LABEL,
    LAUNCHER_ANNOTATION,
    LAUNCHER_COMPONENT,
    REVISION_ANNOTATION,
    STATE_COMPONENT,
    SUCCESS_TASKS_ANNOTATION,
    SUSPENDED_ANNOTATION,
    SWEEP_OBJECTIVE_ANNOTATION,
    SWEEP_VALUES_ANNOTATION,
    object_labels,
)
from ..launcher_interface import runs_launcher
from ..names import launcher_account_name, role_name, state_config_map_name
from ..sweep import trial_values
from .launcher_config_map import releases, success_tasks
from .metadata import object_metadata


def _labels(job: TrainingJob, component: str) -> dict[str, str]:
    return object_labels(job, component, {JOB_LABEL: job.metadata.name})


def state_config_map(job: TrainingJob, revision: str,
                     trial: Trial | None = None) -> dict[str, Any]:
    """`J-state`: no `data` here; the launchers add `<role>-<index>: <outcome> <revision> …`
    (and a trial's `result`). A trial's annotations say its point and the sweep's objective; a
    job without the launcher says so (`tfcompile.dev/launcher: none`): nothing records into it."""
    metadata = object_metadata(job, state_config_map_name(job.metadata.name),
                               _labels(job, STATE_COMPONENT))
    annotations = metadata.setdefault("annotations", {})
    annotations[REVISION_ANNOTATION] = revision
    annotations[SUCCESS_TASKS_ANNOTATION] = ",".join(success_tasks(job))
    if job.spec.suspend:
        annotations[SUSPENDED_ANNOTATION] = "true"
    if not runs_launcher(job):
        annotations[LAUNCHER_ANNOTATION] = job.spec.launcher.value
    if trial is not None:
        annotations[SWEEP_VALUES_ANNOTATION] = trial_values(trial)
        if trial.objective is not None:
            annotations[SWEEP_OBJECTIVE_ANNOTATION] = (
                f"{trial.objective.metric} {trial.objective.goal.value}")
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata}


def service_account(job: TrainingJob) -> dict[str, Any]:
    name = launcher_account_name(job.metadata.name)
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": object_metadata(job, name, _labels(job, LAUNCHER_COMPONENT)),
        "automountServiceAccountToken": False,
    }


def role(job: TrainingJob) -> dict[str, Any]:
    name = job.metadata.name
    rules: list[dict[str, Any]] = [{
        "apiGroups": [""],
        "resources": ["configmaps"],
        "resourceNames": [state_config_map_name(name)],
        "verbs": ["get", "patch"],
    }]
    if releases(job):
        rules.append({
            "apiGroups": ["apps"],
            "resources": ["statefulsets/scale"],
            "resourceNames": [role_name(name, role_key)
                              for role_key, _ in job.spec.roles.defined()],
            "verbs": ["get", "patch"],
        })
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": object_metadata(job, launcher_account_name(name),
                                    _labels(job, LAUNCHER_COMPONENT)),
        "rules": rules,
    }


def pod_service_accounts(job: TrainingJob) -> list[str]:
    """The accounts the training pods run as: the launcher's, and any a `podTemplate` names
    instead (the launchers of those pods need the same rights)."""
    names = [launcher_account_name(job.metadata.name)]
    fragments = [job.spec.pod_template,
                 *(role.pod_template for _, role in job.spec.roles.defined())]
    for fragment in fragments:
        named = ((fragment or {}).get("spec") or {}).get("serviceAccountName")
        if isinstance(named, str) and named not in names:
            names.append(named)
    return names


def role_binding(job: TrainingJob) -> dict[str, Any]:
    name = launcher_account_name(job.metadata.name)
    subjects: list[dict[str, Any]] = []
    for account in pod_service_accounts(job):
        subject: dict[str, Any] = {"kind": "ServiceAccount", "name": account}
        if job.metadata.namespace is not None:
            subject["namespace"] = job.metadata.namespace
        subjects.append(subject)
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": object_metadata(job, name, _labels(job, LAUNCHER_COMPONENT)),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": subjects,
    }
