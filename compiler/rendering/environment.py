"""Build a container's environment, command and arguments exactly as the kubelet does.

The compiled pods learn their task index from the downward API and build `TF_CONFIG` with
Kubernetes `$(VAR)` expansion, so whether a job works depends on the kubelet's rules, not on what
the compiler meant: the order of `envFrom` and `env`, which variables are defined before a
reference, the `$$` escape, references that stay as they are. Validation and the local runner
both use these functions so that they see the same environment a cluster would give.

The rules follow the kubelet's `makeEnvironmentVariables` and Kubernetes'
`third_party/forked/golang/expansion`:

* `envFrom` entries first, in order; each ConfigMap's `data` (never `binaryData`) or Secret's
  `data`, with `prefix` prepended; a later source overrides an earlier one.
* then `env` entries in order; a non-empty `value` is expanded against everything defined so far
  (and the service environment); otherwise `valueFrom` is resolved. A name defined again keeps
  its first position and takes the new value.
* an optional reference to a missing object or key leaves the variable as it was; a mandatory
  one stops the kubelet from starting the container. Neither is invented here: both are
  returned as `EnvironmentReference`s.
* `command` and `args` are expanded against the final environment.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from .quantities import milli_value, parse_quantity

_OPERATOR = "$"
_OPENER = "("
_CLOSER = ")"

# Kubelets before 1.32 (RelaxedEnvironmentVariableValidation off by default) skipped `envFrom`
# keys that do not match this; later kubelets use every key a ConfigMap or Secret can hold.
_STRICT_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")

# Field paths whose value only the node knows (the pod's IPs, the node, the pod's UID).
RUNTIME_FIELD_PATHS = (
    "metadata.uid",
    "spec.nodeName",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
)


@dataclass(frozen=True)
class EnvironmentReference:
    """A reference a container's environment uses that could not be resolved from what is known.

    `kind` is "Secret" or "ConfigMap" (`secretKeyRef`/`configMapKeyRef`, or with `key` None a
    whole `secretRef`/`configMapRef`), "Field" for a `fieldRef` whose value only a running pod
    has (`name` is the field path), or "Resource" for a `resourceFieldRef` that needs the node's
    allocatable resources (`name` is the resource, `key` the container).
    """

    kind: str
    name: str
    key: str | None
    optional: bool


@dataclass(frozen=True)
class DownwardApi:
    """The pod fields `valueFrom.fieldRef` and `resourceFieldRef` read.

    `runtime_fields` holds values that exist only once the pod runs, keyed by field path, e.g.
    `{"status.podIP": "10.1.2.3", "spec.nodeName": "node-1"}`; a path in `RUNTIME_FIELD_PATHS`
    that is absent is reported as unresolved. `namespace` None means the manifests leave it to
    the applier; then `runtime_fields["metadata.namespace"]` is used if given.
    """

    name: str
    namespace: str | None
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    service_account_name: str = "default"
    runtime_fields: Mapping[str, str] = field(default_factory=dict)
    containers: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class EnvironmentSources:
    """The ConfigMaps and Secrets a pod's namespace holds, as far as they are known.

    `config_maps` maps a ConfigMap name to its `data`. `secrets` maps `(secret name, key)` to the
    decoded value; a Secret is known when at least one of its keys is present.
    """

    config_maps: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    secrets: Mapping[tuple[str, str], str] = field(default_factory=dict)

    def secret_data(self, name: str) -> dict[str, str] | None:
        data = {key: value for (secret, key), value in self.secrets.items() if secret == name}
        return dict(sorted(data.items())) if data else None


@dataclass(frozen=True)
class ContainerEnvironment:
    """The environment the kubelet hands the runtime, in the kubelet's order, and what is missing.

    `skipped_names` are `envFrom` keys the kubelet leaves out because they are not valid
    environment variable names (it reports them in an `InvalidEnvironmentVariableNames` event).
    """

    variables: dict[str, str]
    unresolved: list[EnvironmentReference]
    skipped_names: list[str]


def expand(text: str, *contexts: Mapping[str, str]) -> str:
    """Expand Kubernetes `$(VAR)` references in `text`, looking `VAR` up in `contexts` in order.

    `$$` is an escaped `$`; a reference to an unknown variable, an unterminated `$(` and a `$`
    before any other character stay as they are. Nothing is expanded recursively.
    """
    return expand_with(text, _lookup_in(contexts))


def expand_with(text: str, lookup: Callable[[str], str | None]) -> str:
    """`expand` with a lookup function returning None for an unknown variable."""
    pieces: list[str] = []
    checkpoint = 0
    last = len(text) - 1
    cursor = text.find(_OPERATOR)
    while 0 <= cursor < last:  # a `$` as the last character stays as it is
        pieces.append(text[checkpoint:cursor])
        following = text[cursor + 1]
        checkpoint = cursor + 2
        if following == _OPERATOR:
            pieces.append(_OPERATOR)
        elif following == _OPENER:
            closer = text.find(_CLOSER, cursor + 2)
            if closer == -1:
                pieces.append(_OPERATOR + _OPENER)
            else:
                variable = text[cursor + 2 : closer]
                value = lookup(variable)
                pieces.append(
                    value if value is not None else _OPERATOR + _OPENER + variable + _CLOSER
                )
                checkpoint = closer + 1
        else:
            pieces.append(_OPERATOR + following)
        cursor = text.find(_OPERATOR, checkpoint)
    pieces.append(text[checkpoint:])
    return "".join(pieces)


def is_environment_variable_name(name: str, strict: bool = False) -> bool:
    """Whether the kubelet takes `name` from an `envFrom` source.

    `strict`: the rule of kubelets before 1.32 (`[-._a-zA-Z][-._a-zA-Z0-9]*`). Otherwise the
    relaxed rule: printable ASCII except `=`.
    """
    if strict:
        return _STRICT_NAME.fullmatch(name) is not None
    return bool(name) and all(" " <= character <= "~" for character in name) and "=" not in name


def build_environment(
    container: Mapping[str, Any],
    downward_api: DownwardApi,
    sources: EnvironmentSources,
    service_environment: Mapping[str, str] | None = None,
    strict_names: bool = False,
) -> ContainerEnvironment:
    """The environment the kubelet builds for `container` (a pod spec container, as rendered).

    `service_environment` holds the service link variables the kubelet adds (`KUBERNETES_*`
    always, others only with `enableServiceLinks`); they rank below everything the container
    defines and are appended last.
    """
    services = dict(service_environment or {})
    variables: dict[str, str] = {}
    unresolved: list[EnvironmentReference] = []
    skipped: list[str] = []

    for source in container.get("envFrom") or []:
        prefix = str(source.get("prefix") or "")
        if source.get("configMapRef") is not None:
            reference = source["configMapRef"]
            kind = "ConfigMap"
            data = _config_map_data(sources, str(reference.get("name", "")))
        elif source.get("secretRef") is not None:
            reference = source["secretRef"]
            kind = "Secret"
            data = sources.secret_data(str(reference.get("name", "")))
        else:
            continue
        if data is None:
            unresolved.append(
                EnvironmentReference(
                    kind, str(reference.get("name", "")), None, bool(reference.get("optional"))
                )
            )
            continue
        for key, value in data.items():
            name = prefix + key
            if not is_environment_variable_name(name, strict_names):
                skipped.append(name)
                continue
            variables[name] = value

    for entry in container.get("env") or []:
        name = str(entry.get("name", ""))
        value = entry.get("value")
        if value is not None and value != "":
            variables[name] = expand(str(value), variables, services)
            continue
        value_from = entry.get("valueFrom")
        if value_from is None:
            variables[name] = ""
            continue
        resolved = _resolve_value_from(value_from, container, downward_api, sources)
        if isinstance(resolved, EnvironmentReference):
            unresolved.append(resolved)
            continue
        if resolved is not None:
            variables[name] = resolved

    for name, value in services.items():
        variables.setdefault(name, value)
    return ContainerEnvironment(variables=variables, unresolved=unresolved, skipped_names=skipped)


def service_link_variables(service: Mapping[str, Any]) -> dict[str, str]:
    """The variables the kubelet gives every container for one Service (its `FromServices`).

    For the `kubernetes` Service of namespace `default` every pod gets them, `enableServiceLinks`
    or not: `KUBERNETES_SERVICE_HOST`, `KUBERNETES_SERVICE_PORT` (the first port),
    `KUBERNETES_SERVICE_PORT_<NAME>` per named port, and the Docker-link style `KUBERNETES_PORT`
    and `KUBERNETES_PORT_<port>_<PROTOCOL>[_PROTO|_PORT|_ADDR]`. A Service without a cluster IP
    (headless) gives none.
    """
    metadata, spec = service.get("metadata") or {}, service.get("spec") or {}
    address = str(spec.get("clusterIP") or "")
    ports = spec.get("ports") or []
    if address in ("", "None") or not ports:
        return {}
    prefix = str(metadata.get("name", "")).replace("-", "_").upper()
    variables = {f"{prefix}_SERVICE_HOST": address,
                 f"{prefix}_SERVICE_PORT": str(int(ports[0]["port"]))}
    for port in ports:
        if port.get("name"):
            name = str(port["name"]).replace("-", "_").upper()
            variables[f"{prefix}_SERVICE_PORT_{name}"] = str(int(port["port"]))
    host = f"[{address}]" if ":" in address else address
    for position, port in enumerate(ports):
        protocol = str(port.get("protocol") or "TCP")
        number = int(port["port"])
        url = f"{protocol.lower()}://{host}:{number}"
        if position == 0:
            variables[f"{prefix}_PORT"] = url
        port_prefix = f"{prefix}_PORT_{number}_{protocol.upper()}"
        variables[port_prefix] = url
        variables[f"{port_prefix}_PROTO"] = protocol.lower()
        variables[f"{port_prefix}_PORT"] = str(number)
        variables[f"{port_prefix}_ADDR"] = address
    return variables


def expand_arguments(arguments: Sequence[Any] | None, environment: Mapping[str, str]) -> list[str]:
    """`command` or `args` as the kubelet passes them: each item expanded with the final env."""
    return [expand(str(argument), environment) for argument in arguments or []]


def _lookup_in(contexts: Sequence[Mapping[str, str]]) -> Callable[[str], str | None]:
    def lookup(variable: str) -> str | None:
        for context in contexts:
            if variable in context:
                return context[variable]
        return None

    return lookup


def _config_map_data(sources: EnvironmentSources, name: str) -> dict[str, str] | None:
    data = sources.config_maps.get(name)
    if data is None:
        return None
    return {str(key): str(value) for key, value in sorted(data.items())}


def _resolve_value_from(
    value_from: Mapping[str, Any],
    container: Mapping[str, Any],
    downward_api: DownwardApi,
    sources: EnvironmentSources,
) -> str | EnvironmentReference | None:
    """The value of a `valueFrom`; an unresolved reference; None when an optional one is absent."""
    if value_from.get("fieldRef") is not None:
        return _field_value(str(value_from["fieldRef"].get("fieldPath", "")), downward_api)
    if value_from.get("resourceFieldRef") is not None:
        return _resource_value(value_from["resourceFieldRef"], container, downward_api)
    if value_from.get("configMapKeyRef") is not None:
        selector = value_from["configMapKeyRef"]
        name, key = str(selector.get("name", "")), str(selector.get("key", ""))
        optional = bool(selector.get("optional"))
        data = sources.config_maps.get(name)
        if data is not None and key in data:
            return str(data[key])
        return EnvironmentReference("ConfigMap", name, key, optional)
    if value_from.get("secretKeyRef") is not None:
        selector = value_from["secretKeyRef"]
        name, key = str(selector.get("name", "")), str(selector.get("key", ""))
        optional = bool(selector.get("optional"))
        if (name, key) in sources.secrets:
            return sources.secrets[(name, key)]
        return EnvironmentReference("Secret", name, key, optional)
    return None


_SUBSCRIPTED = re.compile(r"(?P<path>metadata\.(?:labels|annotations))\['(?P<key>.*)'\]")


def _field_value(path: str, downward_api: DownwardApi) -> str | EnvironmentReference:
    if path == "spec.host":  # the old v1 name of spec.nodeName, still converted by the kubelet
        path = "spec.nodeName"
    subscripted = _SUBSCRIPTED.fullmatch(path)
    if subscripted is not None:
        source = (
            downward_api.labels
            if subscripted.group("path") == "metadata.labels"
            else downward_api.annotations
        )
        return str(source.get(subscripted.group("key"), ""))
    if path == "metadata.name":
        return downward_api.name
    if path == "metadata.namespace":
        if downward_api.namespace is not None:
            return downward_api.namespace
        if path in downward_api.runtime_fields:
            return downward_api.runtime_fields[path]
        return EnvironmentReference("Field", path, None, False)
    if path == "spec.serviceAccountName":
        return downward_api.service_account_name
    if path in RUNTIME_FIELD_PATHS and path in downward_api.runtime_fields:
        return downward_api.runtime_fields[path]
    return EnvironmentReference("Field", path, None, False)


def _resource_value(
    selector: Mapping[str, Any], container: Mapping[str, Any], downward_api: DownwardApi
) -> str | EnvironmentReference:
    """`resourceFieldRef` as the kubelet computes it: the quantity over the divisor, rounded up."""
    resource = str(selector.get("resource", ""))
    container_name = selector.get("containerName")
    target = container
    if container_name and container_name != container.get("name"):
        target = downward_api.containers.get(str(container_name), {})
    resources = target.get("resources") or {}
    kind, _, resource_name = resource.partition(".")
    limits = resources.get("limits") or {}
    requests = resources.get("requests") or {}
    quantity: Any
    if kind == "limits":
        quantity = limits.get(resource_name)
    elif kind == "requests":
        # The API server defaults a missing request to the limit; with neither, it is zero.
        quantity = requests.get(resource_name, limits.get(resource_name, "0"))
    else:
        quantity = None
    unresolved = EnvironmentReference("Resource", resource, str(target.get("name", "")), False)
    if quantity is None:
        # The kubelet falls back to the node's allocatable resources, which only a node knows.
        return unresolved
    try:
        amount = parse_quantity(str(quantity))
        divisor = parse_quantity(str(selector.get("divisor") or "1"))
    except ValueError:
        return unresolved
    if divisor == 0:
        return unresolved
    if resource_name == "cpu":
        return str(math.ceil(Fraction(milli_value(amount), milli_value(divisor))))
    return str(math.ceil(Fraction(math.ceil(amount), math.ceil(divisor))))


