"""The StatefulSet of one TensorFlow role: stable pod names, one template, the launcher."""

from __future__ import annotations

from typing import Any

from tfcompile.compiler.objects import launcher_interface as launcher
from tfcompile.spec.models import EnvironmentValue, Launcher, Role, RoleName, TrainingJob
from tfcompile.spec.rules import GPU_RESOURCE
from tfcompile.spec.shipped_script import Script
from tfcompile.spec.sweep import Trial

from ..labels import (
    GPU_LABEL,
    REPLICAS_ANNOTATION,
    REVISION_ANNOTATION,
    object_labels,
    role_selector,
)
from ..names import launcher_account_name, role_name
from ..revision_gate import gate_port, revision_variable
from ..sweep import trial_environment
from ..topology import environment
from .gang import gang_template
from .metadata import object_metadata, template_metadata
from .pod_security import (
    HOME_DIRECTORY,
    HOME_VOLUME,
    TMP_DIRECTORY,
    TMP_VOLUME,
    pod_security_context,
    secure_containers,
    settle_token,
)
from .pod_template import merge_maps, merge_pod_template
from .script import script_volume_source
from .service import PORT_NAME
from .storage import claim_name, existing_claims

CONTAINER_NAME = "tensorflow"
SHARED_VOLUME = "shared"
SCRATCH_VOLUME = "scratch"


def command_and_arguments(job: TrainingJob, role: Role,
                          script: Script | None) -> tuple[list[str], list[str]]:
    """The training's command and its arguments: the role's command and args, else the job's;
    with only a script, `python <script>`; with neither (only a job without the launcher), no
    command: the image's entrypoint runs."""
    if role.command is not None:
        return list(role.command), list(role.args or [])
    if job.spec.command is not None:
        command = list(job.spec.command)
    elif script is not None and not script.directory:
        command = ["python", f"{launcher.SCRIPT_DIRECTORY}/{script.file_name}"]
    else:
        assert job.spec.launcher is Launcher.NONE
        command = []
    arguments = role.args if role.args is not None else job.spec.args
    return command, list(arguments)


def training_command(job: TrainingJob, role: Role, script: Script | None) -> list[str]:
    """What the launcher runs: the command and its arguments, as one list."""
    command, arguments = command_and_arguments(job, role, script)
    return [*command, *arguments]


def _command_fields(job: TrainingJob, role_key: RoleName, role: Role, script: Script | None,
                    with_launcher: bool) -> dict[str, list[str]]:
    """The container's `command` and `args`: the launcher, followed by the training command as
    its arguments; without it (`launcher: none`), the training's own command and args."""
    if with_launcher:
        return {"command": launcher.command(role_key.value),
                "args": training_command(job, role, script)}
    command, arguments = command_and_arguments(job, role, script)
    fields = {"command": command} if command else {}
    return {**fields, "args": arguments} if arguments else fields


def _environment_entry(name: str, value: EnvironmentValue) -> dict[str, Any]:
    if value.value is not None:
        return {"name": name, "value": value.value}
    if value.secret_key_ref is not None:
        source, reference = "secretKeyRef", value.secret_key_ref
    else:
        assert value.config_map_key_ref is not None
        source, reference = "configMapKeyRef", value.config_map_key_ref
    selector: dict[str, Any] = {"name": reference.name, "key": reference.key}
    if reference.optional:
        selector["optional"] = True
    return {"name": name, "valueFrom": {source: selector}}


def user_environment(job: TrainingJob, role: Role) -> list[dict[str, Any]]:
    """The job's env with the role's on top, sorted by name (so key order in the spec does not
    matter); tfcompile's own variables come first, so these may refer to them with $(VAR)."""
    merged = {**job.spec.env, **role.env}
    return [_environment_entry(name, merged[name]) for name in sorted(merged)]


def _environment_sources(job: TrainingJob) -> list[dict[str, Any]]:
    sources = []
    for source in job.spec.env_from:
        kind, reference = (
            ("secretRef", source.secret_ref)
            if source.secret_ref is not None
            else ("configMapRef", source.config_map_ref)
        )
        assert reference is not None
        entry: dict[str, Any] = {}
        if source.prefix:
            entry["prefix"] = source.prefix
        selector: dict[str, Any] = {"name": reference.name}
        if reference.optional:
            selector["optional"] = True
        entry[kind] = selector
        sources.append(entry)
    return sources


def _resources(role: Role) -> dict[str, Any]:
    requests = dict(role.resources.requests) if role.resources else {}
    limits = dict(role.resources.limits) if role.resources else {}
    if role.gpus:
        limits[GPU_RESOURCE] = role.gpus
    resources: dict[str, Any] = {}
    for kind, values in (("limits", limits), ("requests", requests)):
        if values:
            resources[kind] = {
                key: value if isinstance(value, int) else str(value)
                for key, value in sorted(values.items())
            }
    return resources


def _volumes(
    job: TrainingJob, role_key: RoleName, script_map: str | None, script: Script | None,
    launcher_map: str | None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(volume mounts, volumes) of a TensorFlow pod: the launcher's program and its state
    unless the job has none (`launcher_map` None)."""
    mounts: list[dict[str, Any]] = []
    volumes: list[dict[str, Any]] = []
    if launcher_map is not None:
        mounts.append({"name": launcher.LAUNCHER_VOLUME, "mountPath": launcher.LAUNCHER_DIRECTORY,
                       "readOnly": True})
        volumes.append({"name": launcher.LAUNCHER_VOLUME, "configMap": {"name": launcher_map}})
    if script_map is not None and script is not None:
        mounts.append({"name": launcher.SCRIPT_VOLUME, "mountPath": launcher.SCRIPT_DIRECTORY,
                       "readOnly": True})
        volumes.append({"name": launcher.SCRIPT_VOLUME,
                        "configMap": script_volume_source(script, script_map)})
    if launcher_map is not None:
        mounts.append({"name": launcher.STATE_VOLUME, "mountPath": launcher.STATE_DIRECTORY})
        volumes.append({"name": launcher.STATE_VOLUME, "emptyDir": {}})
    mounts.append({"name": HOME_VOLUME, "mountPath": HOME_DIRECTORY})
    volumes.append({"name": HOME_VOLUME, "emptyDir": {}})
    mounts.append({"name": TMP_VOLUME, "mountPath": TMP_DIRECTORY})
    volumes.append({"name": TMP_VOLUME, "emptyDir": {}})
    shared, scratch = job.spec.storage.shared, job.spec.storage.scratch
    claim = claim_name(job)
    if shared is not None and claim is not None:
        mounts.append({"name": SHARED_VOLUME, "mountPath": shared.mount_path})
        volumes.append({"name": SHARED_VOLUME, "persistentVolumeClaim": {"claimName": claim}})
    if scratch is not None:
        mounts.append({"name": SCRATCH_VOLUME, "mountPath": scratch.mount_path})
        empty_dir: dict[str, Any] = {}
        if scratch.size_limit is not None:
            empty_dir["sizeLimit"] = scratch.size_limit
        volumes.append({"name": SCRATCH_VOLUME, "emptyDir": empty_dir})
    claim_mounts, claim_volumes = existing_claims(job, role_key)
    return [*mounts, *claim_mounts], [*volumes, *claim_volumes]


def statefulset(
    job: TrainingJob,
    role_key: RoleName,
    role: Role,
    script: Script | None,
    script_map: str | None,
    launcher_map: str | None,
    revision: str,
    trial: Trial | None = None,
) -> dict[str, Any]:
    """StatefulSet `J-R` governed by the headless Service `J-R`; pods start in parallel. A
    sweep's trial sees its values as variables, before the job's own (`sweep.py`). Without a
    launcher (`launcher_map` None, `launcher: none`) the container runs the training command
    itself, with no revision gate, no launcher state and no service-account token."""
    name = job.metadata.name
    selector = role_selector(name, role_key)
    labels = object_labels(job, role_key.value, selector)
    object_labels_with_marks = dict(labels)
    if role.gpus:
        object_labels_with_marks[GPU_LABEL] = "true"
    mounts, volumes = _volumes(job, role_key, script_map, script, launcher_map)
    with_launcher = launcher_map is not None
    container: dict[str, Any] = {
        "name": CONTAINER_NAME,
        "image": role.image or job.spec.image,
        **_command_fields(job, role_key, role, script, with_launcher),
    }
    sources = _environment_sources(job)
    if sources:
        container["envFrom"] = sources
    swept = dict(trial.values) if trial is not None else {}
    home = [] if "HOME" in {**job.spec.env, **role.env, **swept} else [
        {"name": "HOME", "value": HOME_DIRECTORY}]
    gate = [revision_variable()] if with_launcher else []
    container["env"] = [*environment(job, role_key), *gate, *home,
                        *trial_environment(trial, name, with_launcher),
                        *user_environment(job, role)]
    container["ports"] = [{"name": PORT_NAME, "containerPort": job.spec.port, "protocol": "TCP"},
                          *([gate_port()] if with_launcher else [])]
    resources = _resources(role)
    if resources:
        container["resources"] = resources
    container["volumeMounts"] = mounts
    template = pod_template(
        job, role,
        {
            "metadata": template_metadata(job, labels, {REVISION_ANNOTATION: revision}),
            "spec": {
                # The launcher records success and failure through this account's token; a
                # job without the launcher needs no token.
                **({"serviceAccountName": launcher_account_name(name),
                    "automountServiceAccountToken": True} if with_launcher
                   else {"automountServiceAccountToken": False}),
                "enableServiceLinks": False,
                "securityContext": pod_security_context(),
                "restartPolicy": "Always",
                "containers": [container],
                "volumes": volumes,
            },
        },
    )
    metadata = object_metadata(job, role_name(name, role_key), object_labels_with_marks)
    replicas = 0 if job.spec.suspend else role.replicas
    metadata.setdefault("annotations", {})[REPLICAS_ANNOTATION] = str(replicas)
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": metadata,
        "spec": {
            "replicas": replicas,
            "serviceName": role_name(name, role_key),
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": selector},
            "template": template,
        },
    }


def pod_template(job: TrainingJob, role: Role, generated: dict[str, Any]) -> dict[str, Any]:
    """The generated template with the job's `podTemplate` and then the role's merged in, then
    what the gang scheduler needs; every container secured, and an empty toleration list on
    GPU roles (the gpu component appends its toleration to it)."""
    fragments = [fragment for fragment in (job.spec.pod_template, role.pod_template)
                 if fragment is not None]
    template = generated
    for fragment in fragments:
        template = merge_pod_template(template, fragment)
    gang = gang_template(job)
    if gang is not None:
        template = merge_maps(template, gang)
    spec = secure_containers(template["spec"])
    settle_token(spec, fragments)
    if role.gpus and "tolerations" not in spec:
        spec["tolerations"] = []
    template["spec"] = spec
    return template
