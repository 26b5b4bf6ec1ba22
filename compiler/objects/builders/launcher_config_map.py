"""The launcher's ConfigMap: one per job, mounted by every role, named by the launcher's protocol.

The launcher is the same program for every pod of a job, so it is shipped once per job, beside
the job's settings: `binaryData` holds it as one zip application (`tfcompile-launcher.pyz`, one
line of base64; `output/launcher_zip.py` says how the zip is built), `data` the settings. Its
name is `J-launcher-v<protocol>`, not a digest of its bytes, and the revision leaves the program
out (`compile.revision`): a new launcher of the same protocol replaces the zip in place (the
kubelet refreshes the mounted files; a launcher that already runs imported every module at its
start and never reads the zip again, one that starts reads the new one) and restarts no pod. A
new protocol is a new name in every pod template, so the job rolls as a whole.

Why a zip rather than the modules as text: the launcher's ~1,150 lines were most of every job
directory (a one-role job, examples/mnist, compiled to 1,846 lines, 1,169 of them the launcher;
the 3x3 sweep, examples/sweep, to 13,860 in its nine directories), repeated in every job and
trial, so a reviewer scrolled past tfcompile's own code, pinned by tfcompile's version, to find
the job. Shipped as a zip the launcher's ConfigMap is 17 lines: mnist compiles to 694 lines and
the sweep to 3,501 (`tests/test_output_size.py` holds them to 700 and 4,000), and each job
directory still applies on its own. What a reviewer loses is the launcher's text in the pull
request; what they keep is its SHA-256 (`LAUNCHER_DIGEST_ANNOTATION`), a short line that changes
exactly when the program does, and `tfcompile diff`, which names a restart the launcher's
ConfigMap causes `launcher`. base64 has no `$` (Flux's post-build substitution leaves it alone),
the zip is ~72 KB of base64 of the ConfigMap's 1 MiB (as its text was ~55 KB; both well under
client-side apply's 256 KiB annotation), and Argo CD and Flux compare `binaryData` as they
compare `data` (as strings, after their own normalisation). The settings are one line of JSON
(`launcher.settings_text`), so a change to them is one changed line.

The settings differ by job and do change how the training runs, so the revision covers them, and
they carry the revision they were compiled with (`settings_with_revision`): during a roll, or
before the kubelet has refreshed the files, a launcher whose settings are of another revision
waits for its own instead of acting on another revision's."""

from __future__ import annotations

import json
from typing import Any

from tfcompile.compiler.objects import launcher_interface as launcher
from tfcompile.spec.models import OnFailure, OnSuccess, RoleName, TrainingJob

from ..labels import JOB_LABEL, LAUNCHER_COMPONENT, LAUNCHER_DIGEST_ANNOTATION, object_labels
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
        "onFailure": job.spec.on_failure.value,
        "deadline": None if job.spec.deadline is None else {
            "seconds": job.spec.deadline_seconds(), "written": job.spec.deadline},
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


def launcher_data(job: TrainingJob) -> dict[str, str]:
    """The ConfigMap's text: the job's settings (without their revision:
    `settings_with_revision`)."""
    return {launcher.SETTINGS_FILE: launcher.settings_text(launcher_settings(job))}


def settings_with_revision(config_map: dict[str, Any], revision: str) -> None:
    """Put the job's revision into the settings of its launcher ConfigMap."""
    data = config_map["data"]
    settings = json.loads(data[launcher.SETTINGS_FILE])
    settings[launcher.REVISION_SETTING] = revision
    data[launcher.SETTINGS_FILE] = launcher.settings_text(settings)


def without_revision_setting(data: dict[str, Any]) -> dict[str, Any]:
    """A launcher ConfigMap's data with the settings' revision left out (what changes with every
    revision, rather than with how the launcher runs); data it cannot read stays as it is."""
    text = data.get(launcher.SETTINGS_FILE)
    if not isinstance(text, str):
        return data
    try:
        settings = json.loads(text)
    except ValueError:
        return data
    if not isinstance(settings, dict):
        return data
    settings.pop(launcher.REVISION_SETTING, None)
    return {**data, launcher.SETTINGS_FILE: launcher.settings_text(settings)}


def launcher_name(job: TrainingJob, program: launcher.LauncherProgram) -> str:
    """`J-launcher-v<protocol>`."""
    return launcher_config_map_name(job.metadata.name, f"v{program.protocol}")


def launcher_config_map(job: TrainingJob, program: launcher.LauncherProgram) -> dict[str, Any]:
    labels = object_labels(job, LAUNCHER_COMPONENT, {JOB_LABEL: job.metadata.name})
    metadata = object_metadata(job, launcher_name(job, program), labels)
    metadata["annotations"] = {**metadata.get("annotations", {}),
                               LAUNCHER_DIGEST_ANNOTATION: program.digest()}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata,
        "data": launcher_data(job),
        "binaryData": program.binary_data(),
    }


def releases(job: TrainingJob) -> bool:
    """Whether the job's own pods may scale it to 0: after success, after giving up, or both."""
    return (job.spec.on_success is OnSuccess.RELEASE
            or job.spec.on_failure is OnFailure.RELEASE)
