"""A TFJob's plain data into a job spec's, field by field (pure: no files, no YAML).

The order of the work: the object's own fields, each replica spec into a role (`replicas`), the
values every role shares hoisted to the job (image, command and args, env, envFrom, the port,
the pod template), then how the job ends and is scheduled (`run_policy`). A job runs tfcompile's
launcher when every role has a command; a TFJob that ran an image's entrypoint becomes a job
with `launcher: none`, which runs it the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tfcompile.spec.models import RoleName
from tfcompile.spec.problems import FieldPath

from .notes import Findings, OutputPath
from .replicas import DEFAULT_PORT, RESERVED_PREFIXES, RoleParts, replica_role, take_apart
from .run_policy import KUEUE_QUEUE_LABEL, lifecycle, scheduling

API_VERSION = "kubeflow.org/v1"
KIND = "TFJob"
REPLICA_SPECS = ("spec", "tfReplicaSpecs")


@dataclass(frozen=True)
class Converted:
    """The job spec's data (None when a problem stopped the conversion) and what was said."""

    job: dict[str, Any] | None
    findings: Findings


def convert_tfjob(tfjob: Any) -> Converted:
    findings = Findings()
    if not isinstance(tfjob, dict):
        findings.problem((), f"expected a mapping: a Kubeflow {KIND} of apiVersion {API_VERSION}")
        return Converted(None, findings)
    if tfjob.get("apiVersion") != API_VERSION:
        findings.problem(("apiVersion",), f"must be {API_VERSION}: convert reads a Kubeflow "
                         f"{KIND} of the training-operator's v1 API")
    if tfjob.get("kind") != KIND:
        findings.problem(("kind",), f"must be {KIND}: convert reads a Kubeflow {KIND}")
    if findings.problems:
        return Converted(None, findings)
    metadata = _metadata(tfjob.get("metadata"), findings)
    spec = tfjob.get("spec")
    if not isinstance(spec, dict):
        findings.problem(("spec",), f"a {KIND} needs a spec with tfReplicaSpecs")
        return Converted(None, findings)
    for key in tfjob:
        if key == "status":
            findings.note(("status",), "written by the operator; `tfcompile status` reads a "
                          "job's state from its objects")
        elif key not in ("apiVersion", "kind", "metadata", "spec"):
            findings.note((key,), f"not a field of a {KIND}; not converted")
    roles = _roles(spec.get("tfReplicaSpecs"), findings)
    _spec_fields(spec, roles, findings)
    if findings.problems or not roles:
        return Converted(None, findings)
    with_launcher = all(role.command is not None for role in roles)
    job_spec = _hoisted(roles, with_launcher, findings)
    gang, priority = scheduling(tfjob, roles, findings)
    if priority is not None:
        template = job_spec.setdefault("podTemplate", {})
        template.setdefault("spec", {})["priorityClassName"] = priority
        findings.came_from(("spec", "podTemplate", "spec", "priorityClassName"),
                           ("spec", "runPolicy", "schedulingPolicy", "priorityClass"))
    if gang:
        job_spec["scheduling"] = gang
    job_spec.update(lifecycle(spec, roles, with_launcher, findings))
    job = {"apiVersion": "tfcompile.dev/v1alpha1", "kind": "TrainingJob", "metadata": metadata,
           "spec": job_spec}
    return Converted(None if findings.problems else job, findings)


def _metadata(metadata: Any, findings: Findings) -> dict[str, Any]:
    if not isinstance(metadata, dict) or not isinstance(metadata.get("name"), str):
        findings.problem(("metadata",), "convert needs metadata.name (a generateName has no "
                         "stable name for the job's objects)")
        return {}
    converted: dict[str, Any] = {}
    for key, value in metadata.items():
        where: FieldPath = ("metadata", key)
        if key in ("name", "namespace"):
            converted[key] = value
        elif key in ("labels", "annotations") and isinstance(value, dict):
            kept = {}
            for name, text in value.items():
                if key == "labels" and name == KUEUE_QUEUE_LABEL:
                    continue  # spec.scheduling: kueue (run_policy.scheduling)
                if str(name).startswith(RESERVED_PREFIXES):
                    findings.note((*where, name), "keys under tfcompile.dev/ and "
                                  "app.kubernetes.io/ are tfcompile's; not converted")
                else:
                    kept[name] = text
            if kept:
                converted[key] = kept
        else:
            findings.note(where, "set by the API server or for the TFJob object itself; not "
                          "converted")
        findings.came_from(("metadata", key), where)
    return converted


def _roles(specs: Any, findings: Findings) -> list[RoleParts]:
    if not isinstance(specs, dict) or not specs:
        findings.problem(REPLICA_SPECS, "a TFJob needs tfReplicaSpecs: Chief, Master, Worker, "
                         "PS or Evaluator, each with a template")
        return []
    roles: dict[RoleName, RoleParts] = {}
    for type_key, replica in specs.items():
        where = (*REPLICA_SPECS, type_key)
        name = replica_role(str(type_key))
        if name is None:
            findings.problem(where, "not a TFJob replica type: Chief, Master, Worker, PS or "
                             "Evaluator (any case)")
            continue
        if name in roles:
            findings.problem(where, "a second replica spec of this role (Chief and Master are "
                             "both the chief; types are read ignoring case): give one")
            continue
        parts = take_apart(name, where, replica, findings)
        if parts is None:
            continue
        if str(type_key).lower() == "master":
            findings.note(where, "Master becomes the chief role: TF_CONFIG names it chief "
                          "(the operator wrote master); a script that looks for master in "
                          "TF_CONFIG must look for chief (TensorFlow 2 and tf.estimator's "
                          "cloud environment expect chief)")
        if parts.replicas == 0:
            findings.note((*where, "replicas"), "0: the role is left out of TF_CONFIG (the "
                          "operator listed it with no hosts)")
        if parts.command is None:
            findings.note(where, "no command: the operator ran the image's entrypoint, and so "
                          "does this job (launcher: none: nothing records success, an exit 0 "
                          "restarts the training); for tfcompile's launcher, write the "
                          "entrypoint as the command (docker inspect shows it) and remove "
                          "launcher: none")
        roles[name] = parts
    return [roles[name] for name in RoleName if name in roles]


def _spec_fields(spec: dict[str, Any], roles: list[RoleParts], findings: Findings) -> None:
    """TFJobSpec's fields other than the replica specs and the run policy."""
    for key in spec:
        where: FieldPath = ("spec", key)
        if key in ("tfReplicaSpecs", "runPolicy"):
            continue
        if key == "successPolicy":
            if spec[key] != "AllWorkers" and not any(role.name is RoleName.CHIEF
                                                     for role in roles):
                findings.note(where, "no equivalent: without a chief the operator's default "
                              "ended the job with worker 0; tfcompile's ends it when every "
                              "worker has succeeded (AllWorkers)")
        elif key == "enableDynamicWorker":
            if spec[key] is True:
                findings.note(where, "no equivalent: change roles.worker.replicas in git, and "
                              "every task restarts on the new TF_CONFIG, together")
        elif key in ("cleanPodPolicy", "ttlSecondsAfterFinished", "activeDeadlineSeconds",
                     "backoffLimit"):
            findings.note(where, "an earlier API's place for it: TFJob v1 reads it under "
                          "runPolicy (the operator ignores it here); not converted")
        else:
            findings.note(where, "not a field of a TFJob v1 spec (the operator ignores it); "
                          "not converted")


def _shared(roles: list[RoleParts], value: Any) -> bool:
    values = [value(role) for role in roles]
    return all(item == values[0] for item in values)


def _hoisted(roles: list[RoleParts], with_launcher: bool,
             findings: Findings) -> dict[str, Any]:
    """The job's spec: values all roles share written once, the others per role."""
    spec: dict[str, Any] = {}
    per_role: dict[RoleName, dict[str, Any]] = {role.name: {"replicas": role.replicas}
                                                for role in roles}
    for role in roles:
        findings.came_from(("spec", "roles", role.name.value), role.source)
        findings.came_from(("spec", "roles", role.name.value, "replicas"),
                           role.sources["replicas"])

    def place(field: str, value: Any, source_key: str) -> None:
        if _shared(roles, value):
            if value(roles[0]) is not None:
                spec[field] = value(roles[0])
                findings.came_from(("spec", field), roles[0].sources.get(source_key, ()))
            return
        for role in roles:
            if value(role) is not None:
                per_role[role.name][field] = value(role)
                findings.came_from(("spec", "roles", role.name.value, field),
                                   role.sources.get(source_key, role.source))

    place("image", lambda role: role.image, "image")
    if _shared(roles, lambda role: (role.command, role.args)):
        for field in ("command", "args"):
            if getattr(roles[0], field) is not None:
                spec[field] = getattr(roles[0], field)
                findings.came_from(("spec", field), roles[0].sources[field])
    else:
        for role in roles:
            for field in ("command", "args"):
                if getattr(role, field) is not None:
                    per_role[role.name][field] = getattr(role, field)
                    findings.came_from(("spec", "roles", role.name.value, field),
                                       role.sources[field])
    _environment(roles, spec, per_role, findings)
    place("envFrom", lambda role: role.env_from, "envFrom")
    ports = {role.port for role in roles if role.port is not None}
    if ports and ports != {DEFAULT_PORT}:
        port_role = next(role for role in roles if role.port is not None)
        spec["port"] = port_role.port
        findings.came_from(("spec", "port"), port_role.sources["port"])
        for role in roles:
            if role.port not in (None, spec["port"]):
                findings.note(role.sources["port"], "every role listens on one port "
                              "(spec.port); this replica's is not converted")
    if not with_launcher:
        spec["launcher"] = "none"
    spec["roles"] = {}
    for role in roles:
        fields = per_role[role.name]
        if role.gpus:
            fields["gpus"] = role.gpus
            findings.came_from(("spec", "roles", role.name.value, "gpus"), role.sources["gpus"])
        if role.resources:
            fields["resources"] = role.resources
            findings.came_from(("spec", "roles", role.name.value, "resources"),
                               role.sources["resources"])
    _pod_templates(roles, spec, per_role, findings)
    for role in roles:
        spec["roles"][role.name.value] = per_role[role.name]
    if "podTemplate" in spec:  # after the roles, as the spec's reference lists it
        spec["podTemplate"] = spec.pop("podTemplate")
    return spec


def _environment(roles: list[RoleParts], spec: dict[str, Any],
                 per_role: dict[RoleName, dict[str, Any]], findings: Findings) -> None:
    if _shared(roles, lambda role: role.env):
        if roles[0].env:
            spec["env"] = roles[0].env
            for name in roles[0].env:
                findings.came_from(("spec", "env", name), roles[0].sources[f"env.{name}"])
        return
    for role in roles:
        if role.env:
            per_role[role.name]["env"] = role.env
            for name in role.env:
                findings.came_from(("spec", "roles", role.name.value, "env", name),
                                   role.sources[f"env.{name}"])


def _pod_templates(roles: list[RoleParts], spec: dict[str, Any],
                   per_role: dict[RoleName, dict[str, Any]], findings: Findings) -> None:
    shared = _shared(roles, lambda role: role.pod_template)
    for role in roles:
        if not role.pod_template:
            continue
        base: OutputPath = (("spec", "podTemplate") if shared else
                            ("spec", "roles", role.name.value, "podTemplate"))
        for part in ("metadata", "spec"):
            source = role.sources.get(f"podTemplate.{part}")
            if source is not None:
                findings.came_from((*base, part), source)
        order = role.sources.get("containers.order", ())
        for index, position in enumerate(order):
            findings.came_from((*base, "spec", "containers", index),
                               (*role.sources["containers"], position))
        if shared:
            spec["podTemplate"] = role.pod_template
            return
        per_role[role.name]["podTemplate"] = role.pod_template
