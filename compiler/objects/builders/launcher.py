"""The launcher's ConfigMap: one per job, mounted by every role, named by a hash of its content.

The launcher is the same program for every pod of a job, so it is shipped once, where a reviewer
reads it once; a new launcher or new settings give a new name, which changes the pod templates and
so the revision.
"""

from __future__ import annotations

import hashlib
from typing import Any

from tfcompile.compiler.objects import launcher
from tfcompile.spec.models import OnSuccess, RoleName, TrainingJob

from ..labels import JOB_LABEL, LAUNCHER_COMPONENT, object_labels
from ..names import launcher_config_map_name, role_name, state_config_map_name
from ..revision_gate import gate_settings
from .metadata import object_metadata


def success_tasks(job: TrainingJob) -> list[str]:
    """The tasks whose success is the job's: the chief, or every worker when there is none."""
    roles = job.spec.roles
    if roles.replicas(RoleName.CHIEF) > 0:
        return launcher.task_names(RoleName.CHIEF.value, roles.replicas(RoleName.CHIEF))
    return launcher.task_names(RoleName.WORKER.value, roles.replicas(RoleName.WORKER))


def launcher_settings(job: TrainingJob) -> dict[str, Any]:
    """What every pod's launcher needs to know about the job."""
    name = job.metadata.name
    defined = [role_key for role_key, _ in job.spec.roles.defined()]
    policy = job.spec.failure_policy
    return {
        "stateConfigMap": state_config_map_name(name),
        "successTasks": success_tasks(job),
        "evaluatorTasks": launcher.task_names(
            RoleName.EVALUATOR.value, job.spec.roles.replicas(RoleName.EVALUATOR)),
        "onSuccess": job.spec.on_success.value,
        "releaseFirst": [role_name(name, role) for role in defined
                         if role is not RoleName.EVALUATOR],
        "releaseLast": [role_name(name, role) for role in defined
                        if role is RoleName.EVALUATOR],
        "failurePolicy": None if policy is None else {
            "maxRestarts": policy.max_restarts,
            "doNotRetryExitCodes": sorted(set(policy.do_not_retry_exit_codes)),
        },
        "revisionGate": gate_settings(),
    }


def launcher_data(job: TrainingJob, program: launcher.LauncherProgram) -> dict[str, str]:
    return {
        launcher.PROGRAM_FILE: program.text,
        launcher.SETTINGS_FILE: launcher.settings_text(launcher_settings(job)),
    }


def launcher_name(job: TrainingJob, program: launcher.LauncherProgram) -> str:
    """`J-launcher-<10 hex digits of SHA-256 over the ConfigMap's data>`."""
    hasher = hashlib.sha256()
    for key, text in sorted(launcher_data(job, program).items()):
        hasher.update(key.encode() + b"\0" + text.encode() + b"\0")
    return launcher_config_map_name(job.metadata.name, hasher.hexdigest()[:10])


def launcher_config_map(job: TrainingJob, program: launcher.LauncherProgram) -> dict[str, Any]:
    labels = object_labels(job, LAUNCHER_COMPONENT, {JOB_LABEL: job.metadata.name})
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": object_metadata(job, launcher_name(job, program), labels),
        "data": launcher_data(job, program),
    }


def releases(job: TrainingJob) -> bool:
    return job.spec.on_success is OnSuccess.RELEASE
