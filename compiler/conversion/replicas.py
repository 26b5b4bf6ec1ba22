"""One TFJob replica spec (`spec.tfReplicaSpecs.<Type>`) taken apart into a role's fields.

The operator reads a replica type in any case (`setTypeNameToCamelCase`: `worker` is `Worker`)
and makes the chief of `Chief` or `Master`; its container named `tensorflow` is the training.
That container's image, command, args, env, envFrom, resources and TensorFlow port become the
role's own fields (`mapping` hoists the ones every role shares to the job); everything else of
the pod template stays a `podTemplate` fragment, minus what a StatefulSet or tfcompile owns
(each a note).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tfcompile.spec.models import RoleName
from tfcompile.spec.problems import FieldPath

from .notes import Findings

REPLICA_TYPES = {"chief": RoleName.CHIEF, "master": RoleName.CHIEF, "worker": RoleName.WORKER,
                 "ps": RoleName.PS, "evaluator": RoleName.EVALUATOR}
"""TFJob replica types (compared as the operator does, ignoring case) and their roles."""

CONTAINER = "tensorflow"
PORT_NAME = "tfjob-port"
GPU = "nvidia.com/gpu"
DEFAULT_PORT = 2222
RESERVED_VARIABLES = frozenset({
    "TF_CONFIG", "TASK_INDEX", "JOB_NAME", "WORKER_NUMBER", "TOT_WORKERS", "NUM_WORKERS",
    "PS_HOSTS", "WORKER_HOSTS", "TFCOMPILE_REVISION", "TFCOMPILE_TRIAL", "TFCOMPILE_RESULT_FILE",
})
"""Variables tfcompile sets itself (the spec refuses them in env)."""
RESERVED_PREFIXES = ("tfcompile.dev/", "app.kubernetes.io/")
OWNED_POD_FIELDS = {
    "restartPolicy": "a StatefulSet's pods always restart (restartPolicy Always); the replica's "
                     "restartPolicy says what the TFJob did on failure",
    "activeDeadlineSeconds": "a StatefulSet refuses it in its pods; spec.deadline (from "
                             "runPolicy.activeDeadlineSeconds) stops a training that runs too "
                             "long",
    "hostname": "the pods' DNS names are tfcompile's (TF_CONFIG names them)",
    "subdomain": "the pods' DNS names are tfcompile's (TF_CONFIG names them)",
}
GANG_SCHEDULERS = {"volcano": "volcano", "scheduler-plugins-scheduler": "coscheduling"}


@dataclass
class RoleParts:
    """What one replica spec says, by the tfcompile field it becomes; `sources` holds the TFJob
    path of each (by field name) for notes and located problems."""

    name: RoleName
    source: FieldPath
    replicas: int = 1
    image: Any = None
    command: Any = None
    args: Any = None
    env: dict[str, Any] = field(default_factory=dict)
    env_from: Any = None
    resources: dict[str, dict[str, Any]] = field(default_factory=dict)
    gpus: int = 0
    port: int | None = None
    restart_policy: str = "Never"
    scheduler: str | None = None
    pod_template: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, FieldPath] = field(default_factory=dict)


def replica_role(type_key: str) -> RoleName | None:
    return REPLICA_TYPES.get(type_key.lower())


def take_apart(name: RoleName, source: FieldPath, replica: Any,
               findings: Findings) -> RoleParts | None:
    """The role a replica spec becomes, or None (with a problem) when it cannot be one."""
    parts = RoleParts(name=name, source=source)
    if not isinstance(replica, dict):
        findings.problem(source, "a replica spec must be a mapping with replicas and template")
        return None
    for key in replica:
        if key not in ("replicas", "restartPolicy", "template"):
            findings.note((*source, key), "not a field of a TFJob v1 replica spec (the operator "
                          "ignores it); not converted")
    replicas = replica.get("replicas", 1)
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
        findings.problem((*source, "replicas"), "replicas must be a whole number, 0 or more")
        return None
    parts.replicas = replicas
    parts.sources["replicas"] = (*source, "replicas")
    policy = replica.get("restartPolicy", "Never")
    if policy not in ("Never", "OnFailure", "Always", "ExitCode"):
        findings.problem((*source, "restartPolicy"),
                         "restartPolicy must be Never, OnFailure, Always or ExitCode")
        return None
    parts.restart_policy = policy
    parts.sources["restartPolicy"] = (*source, "restartPolicy")
    template = replica.get("template")
    if not isinstance(template, dict) or not isinstance(template.get("spec"), dict):
        findings.problem((*source, "template"), "the replica needs a template with a spec and "
                         f"a container named {CONTAINER} (the operator refuses it without)")
        return None
    _template_metadata(template, (*source, "template"), parts, findings)
    _pod_spec(template["spec"], (*source, "template", "spec"), parts, findings)
    for key in template:
        if key not in ("metadata", "spec"):
            findings.note((*source, "template", key), "not a field of a pod template; not "
                          "converted")
    return parts


def _template_metadata(template: dict[str, Any], source: FieldPath, parts: RoleParts,
                       findings: Findings) -> None:
    metadata = template.get("metadata")
    if metadata is None:
        return
    if not isinstance(metadata, dict):
        findings.problem((*source, "metadata"), "metadata must be a mapping")
        return
    kept: dict[str, Any] = {}
    for key, value in metadata.items():
        where = (*source, "metadata", key)
        if key in ("labels", "annotations") and isinstance(value, dict):
            entries = {}
            for name, text in value.items():
                if str(name).startswith(RESERVED_PREFIXES):
                    findings.note((*where, name), "keys under tfcompile.dev/ and "
                                  "app.kubernetes.io/ are tfcompile's (its selectors and "
                                  "labels); not converted")
                else:
                    entries[name] = text
            if entries:
                kept[key] = entries
        else:
            findings.note(where, "a pod's name, namespace and other metadata are its "
                          "StatefulSet's; not converted")
    if kept:
        parts.pod_template["metadata"] = kept
        parts.sources["podTemplate.metadata"] = (*source, "metadata")


def _pod_spec(spec: dict[str, Any], source: FieldPath, parts: RoleParts,
              findings: Findings) -> None:
    rest: dict[str, Any] = {}
    for key, value in spec.items():
        where = (*source, key)
        if key == "containers":
            containers = _containers(value, where, parts, findings)
            if containers:
                rest["containers"] = containers
        elif key in OWNED_POD_FIELDS:
            findings.note(where, f"no equivalent: {OWNED_POD_FIELDS[key]}")
        elif key == "schedulerName":
            parts.scheduler = value if isinstance(value, str) else None
            parts.sources["schedulerName"] = where
        else:
            rest[key] = value
    if rest:
        parts.pod_template["spec"] = rest
        parts.sources["podTemplate.spec"] = source


def _containers(containers: Any, source: FieldPath, parts: RoleParts,
                findings: Findings) -> list[Any]:
    """The sidecars and what stays of the `tensorflow` container, that one first."""
    if not isinstance(containers, list):
        findings.problem(source, "containers must be a list")
        return []
    named = [index for index, container in enumerate(containers)
             if isinstance(container, dict) and container.get("name") == CONTAINER]
    if not named:
        findings.problem(source, f"no container named {CONTAINER}: the operator runs the "
                         "training in it and refuses a replica without one")
        return []
    index = named[0]
    training = _training_container(containers[index], (*source, index), parts, findings)
    sidecars = [container for position, container in enumerate(containers) if position != index]
    parts.sources["containers"] = source
    parts.sources["containers.order"] = tuple(  # the TFJob index of each output container
        [index, *(position for position in range(len(containers)) if position != index)])
    return [training, *sidecars] if len(training) > 1 or sidecars else []


def _training_container(container: dict[str, Any], source: FieldPath, parts: RoleParts,
                        findings: Findings) -> dict[str, Any]:
    """The role's fields from the `tensorflow` container, and the rest of it as a fragment."""
    rest: dict[str, Any] = {"name": CONTAINER}
    for key, value in container.items():
        where = (*source, key)
        if key == "name":
            continue
        if key in ("image", "command", "args"):
            setattr(parts, key, value)
            parts.sources[key] = where
        elif key == "env":
            fragment_env = _environment(value, where, parts, findings)
            if fragment_env:
                rest["env"] = fragment_env
        elif key == "envFrom":
            parts.env_from = value
            parts.sources["envFrom"] = where
        elif key == "resources":
            _resources(value, where, parts, findings)
        elif key == "ports":
            ports = _ports(value, where, parts)
            if ports:
                rest["ports"] = ports
        else:
            rest[key] = value
    return rest


def _environment(variables: Any, source: FieldPath, parts: RoleParts,
                 findings: Findings) -> list[Any]:
    """The role's env map; variables of other sources (fieldRef, resourceFieldRef) are
    returned to stay in the container's fragment."""
    if not isinstance(variables, list):
        findings.problem(source, "env must be a list of name and value")
        return []
    stay: list[Any] = []
    for index, variable in enumerate(variables):
        where = (*source, index)
        name = variable.get("name") if isinstance(variable, dict) else None
        if not isinstance(name, str):
            findings.problem(where, "an env entry needs a name")
            continue
        if name in RESERVED_VARIABLES:
            findings.note(where, "tfcompile sets this variable from the job's roles (TF_CONFIG "
                          "from the pods' DNS names); not converted")
            continue
        reference = variable.get("valueFrom")
        if isinstance(reference, dict) and set(reference) <= {"secretKeyRef",
                                                               "configMapKeyRef"}:
            parts.env[name] = reference
        elif reference is not None:
            stay.append(variable)
            continue
        else:
            parts.env[name] = variable.get("value", "")
        parts.sources[f"env.{name}"] = where
    return stay


def _resources(resources: Any, source: FieldPath, parts: RoleParts, findings: Findings) -> None:
    if not isinstance(resources, dict):
        findings.problem(source, "resources must be a mapping of requests and limits")
        return
    parts.sources["resources"] = source
    for kind, amounts in resources.items():
        if kind not in ("requests", "limits") or not isinstance(amounts, dict):
            findings.note((*source, kind), "only requests and limits are converted")
            continue
        kept = {name: amount for name, amount in amounts.items() if name != GPU}
        if GPU in amounts:
            gpus = amounts[GPU]
            count = int(gpus) if isinstance(gpus, int | str) and str(gpus).isdigit() else None
            if count is None:
                findings.problem((*source, kind, GPU), "GPUs must be a whole number")
            elif kind == "limits" or GPU not in resources.get("limits", {}):
                parts.gpus = count
                parts.sources["gpus"] = (*source, kind, GPU)
        if kept:
            parts.resources[kind] = kept


def _ports(ports: Any, source: FieldPath, parts: RoleParts) -> list[Any]:
    """Other ports than the TensorFlow one (`tfjob-port`, whose number becomes spec.port)."""
    if not isinstance(ports, list):
        return []
    others = []
    for index, port in enumerate(ports):
        if isinstance(port, dict) and port.get("name") == PORT_NAME:
            parts.port = port.get("containerPort")
            parts.sources["port"] = (*source, index)
        else:
            others.append(port)
    return others
