"""`podTemplate`: a fragment of a Kubernetes pod template, checked against Kubernetes' own schema.

Users write Kubernetes' vocabulary here (nodeSelector, tolerations, sidecars, volumes, …), so the
fragment is validated strictly (unknown fields are errors) against the `PodTemplateSpec` schema of
the Kubernetes version tfcompile validates against by default, as shipped by the
`kubernetes-validate` package. The same schema drives the JSON Schema for editors and the merge
keys of the strategic merge (`x-kubernetes-patch-merge-key`). Fields tfcompile owns, or a
StatefulSet forbids, are refused with the spec field to use instead.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Iterator, Mapping
from typing import Any

from .mount_paths import form_problem, reserved_problem
from .problems import FieldPath, Problem
from .suggestions import closest, did_you_mean

SCHEMA_KUBERNETES_VERSION = "1.33"
"""The Kubernetes minor whose pod template schema `podTemplate` is checked against: the one
`validate` checks by default, so a field newer Kubernetes versions added is refused here too."""

ROOT_DEFINITION = "io.k8s.api.core.v1.PodTemplateSpec"
INGRESS_RULE_DEFINITION = "io.k8s.api.networking.v1.NetworkPolicyIngressRule"
DEFINITIONS_PREFIX = "#/$defs/"
FRAGMENT_OPTIONAL = ("io.k8s.api.core.v1.PodSpec",)
"""Definitions whose `required` fields a fragment may leave out (tfcompile gives the containers)."""

PLACEHOLDER = "x-tfcompile-kubernetes-definition"

TENSORFLOW_CONTAINER = "tensorflow"
"""The container tfcompile generates; every other container of a pod template is a sidecar."""


def _schema_directory_name() -> str:
    return f"v{SCHEMA_KUBERNETES_VERSION}.0-local-strict"


@functools.cache
def definitions() -> dict[str, Any]:
    """The Kubernetes definitions a pod template and a NetworkPolicy ingress rule use, by name
    (`io.k8s.api.core.v1.PodSpec`); their references are already `#/$defs/<name>`."""
    from importlib import resources  # only a job with a podTemplate or ingress rules reads them

    directory = resources.files("kubernetes_validate").joinpath(
        "kubernetes-json-schema", _schema_directory_name()
    )
    everything = json.loads(directory.joinpath("_definitions.json").read_text())["$defs"]
    found: dict[str, Any] = {}
    pending = [ROOT_DEFINITION, INGRESS_RULE_DEFINITION]
    while pending:
        name = pending.pop()
        if name in found:
            continue
        definition = copy.deepcopy(everything[name])
        if name in FRAGMENT_OPTIONAL:
            definition.pop("required", None)
        found[name] = definition
        pending.extend(_references(definition))
    return dict(sorted(found.items()))


def _references(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        reference = node.get("$ref")
        if isinstance(reference, str) and reference.startswith(DEFINITIONS_PREFIX):
            yield reference[len(DEFINITIONS_PREFIX):]
        for value in node.values():
            yield from _references(value)
    elif isinstance(node, list):
        for value in node:
            yield from _references(value)


def definition(name: str) -> dict[str, Any]:
    found: dict[str, Any] = definitions()[name]
    return found


def resolve(node: Mapping[str, Any]) -> Mapping[str, Any]:
    """A schema node with its `$ref` followed (one level; definitions do not chain refs)."""
    reference = node.get("$ref")
    if isinstance(reference, str) and reference.startswith(DEFINITIONS_PREFIX):
        return definition(reference[len(DEFINITIONS_PREFIX):])
    return node


def reference_schema(root: str, description: str) -> dict[str, Any]:
    """The JSON Schema of a field holding a Kubernetes `root` object: a placeholder that
    `with_kubernetes_definitions` turns into a reference (pydantic checks `$ref`s it made)."""
    return {PLACEHOLDER: root, "description": description}


def with_kubernetes_definitions(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with its placeholders turned into references to the Kubernetes definitions,
    which it then carries in `$defs`."""

    def rewrite(node: Any) -> Any:
        if isinstance(node, dict):
            if PLACEHOLDER in node:
                rest = {key: value for key, value in node.items() if key != PLACEHOLDER}
                return {"$ref": f"{DEFINITIONS_PREFIX}{node[PLACEHOLDER]}", **rest}
            return {key: rewrite(value) for key, value in node.items()}
        if isinstance(node, list):
            return [rewrite(value) for value in node]
        return node

    rewritten: dict[str, Any] = rewrite(schema)
    rewritten["$defs"] = {**rewritten.get("$defs", {}), **definitions()}
    return rewritten


@functools.cache
def _validator(root: str) -> Any:
    # Imported here: only jobs with a podTemplate or ingress rules pay for the schema machinery.
    import jsonschema
    from referencing import Registry

    schema = {"$defs": definitions(), "$ref": f"{DEFINITIONS_PREFIX}{root}"}
    return jsonschema.Draft202012Validator(schema, registry=Registry())


def mapping(value: Any) -> Mapping[str, Any]:
    """`value` when it is a mapping, else an empty one: the walks below read fragments that may
    break the schema (a problem reported by `schema_problems`), and must not fail on them."""
    return value if isinstance(value, Mapping) else {}


def mappings(value: Any) -> Iterator[tuple[int, Mapping[str, Any]]]:
    """The mappings of `value` (a list, else nothing) with their positions in it."""
    if isinstance(value, list):
        yield from ((index, item) for index, item in enumerate(value) if isinstance(item, Mapping))


def _shape_problems(path: FieldPath, value: Any) -> Iterator[Problem]:
    """What no Kubernetes object holds, whatever its schema: a key that is not a string (YAML
    reads `1:` or `true:` as a number or a boolean), and an empty (null) list item, which the
    API server reads as an item with no fields."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                yield Problem((*path, str(key)), "a key of a Kubernetes object is a string: "
                              "quote it", key=True)
            else:
                yield from _shape_problems((*path, key), item)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            if item is None:
                yield Problem((*path, index), "an empty list item (null), which the API server "
                              "reads as an item with no fields; remove it or give its fields")
            else:
                yield from _shape_problems((*path, index), item)


def schema_problems(path: FieldPath, fragment: Any,
                    root: str = ROOT_DEFINITION) -> Iterator[Problem]:
    """Every place where `fragment` breaks the Kubernetes schema of `root` (by default the pod
    template), or holds what no Kubernetes object does (`_shape_problems`); values are never
    echoed (a sidecar's env may hold anything)."""
    shape = list(_shape_problems(path, fragment))
    if shape:
        yield from shape
        return
    errors = sorted(_validator(root).iter_errors(fragment),
                    key=lambda error: (list(map(str, error.absolute_path)), error.message))
    unknown_fields = [(error, *_unknown_fields(path, error)) for error in errors]
    suggested = {(where, field) for _, where, fields in unknown_fields
                 for _, _, field in fields if field is not None}
    for error, where, fields in unknown_fields:
        if error.validator == "additionalProperties" and isinstance(error.instance, dict):
            for unknown, message, _ in fields:
                yield Problem((*where, unknown), message, key=True)
            continue
        if error.validator == "required" and (where, _required_name(error)) in suggested:
            continue  # the unknown field beside it says "did you mean" this one
        yield Problem(where, _describe(error))


def _unknown_fields(path: FieldPath, error: Any
                    ) -> tuple[FieldPath, list[tuple[str, str, str | None]]]:
    """Where `error` is, and for an unknown field error, each unknown field with its message
    and the allowed field it suggests (if any)."""
    where = (*path, *error.absolute_path)
    if error.validator != "additionalProperties" or not isinstance(error.instance, dict):
        return where, []
    from .misplaced_fields import advice  # only a refused fragment needs it

    allowed = sorted(error.schema.get("properties", {}))
    fields: list[tuple[str, str, str | None]] = []
    for unknown in sorted(set(error.instance) - set(allowed), key=str):
        hint = advice((*where, str(unknown)))
        found = None if hint else closest(str(unknown), allowed)
        listed = f"allowed here: {', '.join(allowed)}" + did_you_mean(unknown, allowed)
        fields.append((str(unknown), f"unknown field (Kubernetes {SCHEMA_KUBERNETES_VERSION} "
                       "schema); " + (hint or listed), found))
    return where, fields


def _required_name(error: Any) -> str:
    """The field a `required` error names (its message is "'name' is a required property")."""
    return str(error.message.split(" is a required")[0]).strip("'")


def _describe(error: Any) -> str:
    where = f"(Kubernetes {SCHEMA_KUBERNETES_VERSION} schema)"
    if error.validator == "type":
        kinds = error.validator_value
        kinds = [kinds] if isinstance(kinds, str) else [k for k in kinds if k != "null"]
        return f"expected {' or '.join(kinds)} {where}"
    if error.validator == "required":
        return f"{error.message.split(' is a required')[0]} is required {where}"
    if error.validator == "enum":
        allowed = [str(value) for value in error.validator_value]
        return (f"must be one of {', '.join(allowed)} {where}"
                + did_you_mean(error.instance, allowed))
    if error.validator in ("oneOf", "anyOf"):
        return f"expected a string or an integer {where}"
    return f"not allowed by the {error.validator} rule {where}"



POD_FIELDS_OWNED = {
    "restartPolicy": "a StatefulSet's pods always restart (`Always`); tfcompile's launcher records "
                     "success and idles, so nothing needs another policy",
    "activeDeadlineSeconds": "a StatefulSet refuses it; stop a job with spec.suspend: true",
    "hostname": "tfcompile names every pod `<job>-<role>-<index>` for TF_CONFIG; rename the job "
                "(metadata.name) or the role instead",
    "subdomain": "tfcompile sets each role's governing Service for TF_CONFIG; it cannot change",
    "schedulerName": "set spec.scheduling (gang: volcano | coscheduling | kueue) or leave the "
                     "default scheduler",
}
_METADATA_FIELDS_OWNED = {
    "name": "tfcompile names the pods after the job and role (metadata.name of the job)",
    "namespace": "set metadata.namespace of the job",
    "generateName": "tfcompile names the pods after the job and role (metadata.name of the job)",
}
_CONTAINER_FIELDS_OWNED = {
    "image": "set spec.image, or roles.<role>.image",
    "command": "set spec.command (or roles.<role>.command); tfcompile runs it under its launcher",
    "args": "set spec.args, or roles.<role>.args",
}
RESERVED_LABEL_PREFIXES = ("tfcompile.dev/", "app.kubernetes.io/")


TENSORBOARD_CONTAINER = "tensorboard"
"""The container of the TensorBoard pod tfcompile generates."""

TENSORBOARD_POD_FIELDS_OWNED = {
    "restartPolicy": "a Deployment's pods always restart (`Always`)",
    "activeDeadlineSeconds": "a Deployment refuses it",
}
TENSORBOARD_CONTAINER_FIELDS_OWNED = {
    "image": "set spec.tensorboard.image",
    "command": "tfcompile runs `tensorboard --logdir <tensorboard.logDir>`",
    "args": "tfcompile runs `tensorboard --logdir <tensorboard.logDir>`",
}


def owned_field_problems(
    path: FieldPath,
    fragment: Mapping[str, Any],
    reserved_environment: tuple[str, ...],
    reserved_volumes: tuple[str, ...],
    container_name: str = TENSORFLOW_CONTAINER,
) -> Iterator[Problem]:
    """Fields of a (schema-valid) fragment that tfcompile sets itself or a StatefulSet forbids,
    each with the spec field to use instead. `container_name` is tfcompile's container in the
    pod (`tensorflow` in a role's, `tensorboard` in TensorBoard's). Mount paths are judged as
    they are mounted (`mount_paths`): none may take tfcompile's folder, the `tensorflow`
    container's none the service-account token's, and each is written as it is mounted."""
    tensorboard = container_name == TENSORBOARD_CONTAINER
    pod_fields = TENSORBOARD_POD_FIELDS_OWNED if tensorboard else POD_FIELDS_OWNED
    metadata = mapping(fragment.get("metadata"))
    for field, advice in _METADATA_FIELDS_OWNED.items():
        if field in metadata:
            yield Problem((*path, "metadata", field), f"not allowed in podTemplate: {advice}",
                          key=True)
    for kind in ("labels", "annotations"):
        for key in mapping(metadata.get(kind)):
            if str(key).startswith(RESERVED_LABEL_PREFIXES):
                yield Problem(
                    (*path, "metadata", kind, key),
                    f"keys under {' and '.join(RESERVED_LABEL_PREFIXES)} are set by tfcompile; "
                    "choose another key", key=True)
    spec = mapping(fragment.get("spec"))
    for field, advice in pod_fields.items():
        if field in spec:
            yield Problem((*path, "spec", field), f"not allowed in podTemplate: {advice}",
                          key=True)
    for index, volume in mappings(spec.get("volumes")):
        if volume.get("name") in reserved_volumes:
            yield Problem((*path, "spec", "volumes", index, "name"),
                          f"the volume names {', '.join(reserved_volumes)} are tfcompile's "
                          "(script, launcher state, storage, home, tmp); choose another name")
    for kind in ("containers", "initContainers", "ephemeralContainers"):
        for index, container in mappings(spec.get(kind)):
            where = (*path, "spec", kind, index)
            if kind == "containers" and container.get("name") == container_name:
                if tensorboard:
                    yield from _owned_container_fields(where, container,
                                                       TENSORBOARD_CONTAINER_FIELDS_OWNED)
                else:
                    yield from _tensorflow_container_problems(where, container,
                                                              reserved_environment)
            elif container.get("name") == container_name:
                yield Problem((*where, "name"), f"{container_name!r} is the name of "
                              "tfcompile's container; choose another name")
            token = (not tensorboard and kind == "containers"
                     and container.get("name") == container_name)
            yield from _mount_path_problems(where, container, token=token)


MOUNT_FIELDS = (("volumeMounts", "mountPath"), ("volumeDevices", "devicePath"))
"""Where a container names a place in its file system for a volume."""


def _mount_path_problems(where: FieldPath, container: Mapping[str, Any], *,
                         token: bool) -> Iterator[Problem]:
    """A mount (or device) path of a container that would hide what tfcompile or Kubernetes
    mounts (the token only where `token`: the container that runs the launcher), or that is
    not written as it is mounted."""
    for mounts, field in MOUNT_FIELDS:
        for index, mount in mappings(container.get(mounts)):
            mount_path = mount.get(field)
            if not isinstance(mount_path, str):
                continue  # the schema requires a string
            problem = reserved_problem(mount_path, token=token) or form_problem(mount_path)
            if problem is not None:
                yield Problem((*where, mounts, index, field), problem)


def _owned_container_fields(where: FieldPath, container: Mapping[str, Any],
                            owned: Mapping[str, str]) -> Iterator[Problem]:
    for field, advice in owned.items():
        if field in container:
            yield Problem((*where, field), f"tfcompile sets the {container.get('name')} "
                          f"container's {field}: {advice}", key=True)


def _tensorflow_container_problems(
    where: FieldPath, container: Mapping[str, Any], reserved_environment: tuple[str, ...]
) -> Iterator[Problem]:
    yield from _owned_container_fields(where, container, _CONTAINER_FIELDS_OWNED)
    for index, variable in mappings(container.get("env")):
        if variable.get("name") in reserved_environment:
            yield Problem((*where, "env", index, "name"),
                          "set by tfcompile from the job's roles; remove it (tfcompile sets: "
                          f"{', '.join(reserved_environment)})")
    for kind in ("limits", "requests"):
        for name in mapping(mapping(container.get("resources")).get(kind)):
            if name == "nvidia.com/gpu":
                yield Problem((*where, "resources", kind, name),
                              "set GPUs with roles.<role>.gpus, which puts them in limits",
                              key=True)
