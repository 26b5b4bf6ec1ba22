"""A pod as the kubelet runs it: the pod template of rendered manifests made concrete.

The data types below are the contract between `rendering` (which builds them) and its two users,
`validation` and `local_run`. `pod_from_template` plays the kubelet: the environment, command and
arguments after `$(VAR)` expansion, with values from ConfigMaps, Secrets and the downward API,
volumes and mounts, so both users judge what a cluster would run rather than what the compiler
meant. `stateful_set_pods` names the pods a StatefulSet would create and calls it for each.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tfcompile.compiler.objects.labels import POD_INDEX_LABEL

from .environment import (
    DownwardApi,
    EnvironmentReference,
    EnvironmentSources,
    build_environment,
    expand_arguments,
    expand_with,
)
from .manifests import (
    KubernetesObject,
    name_of,
    namespace_of,
)

__all__ = [
    "POD_INDEX_LABEL",
    "Container",
    "ContainerPort",
    "EnvironmentReference",
    "Pod",
    "Volume",
    "VolumeMount",
    "environment_sources",
    "pod_from_template",
]


@dataclass(frozen=True)
class VolumeMount:
    """Where a pod volume appears inside the container.

    `sub_path` is `subPath`, or `subPathExpr` expanded with the container's environment; when the
    expression names a variable that is unset or empty (the kubelet then refuses to start the
    container) `sub_path` is None and `sub_path_expression` keeps the expression.
    """

    volume_name: str
    mount_path: str
    read_only: bool
    sub_path: str | None
    sub_path_expression: str | None = None


@dataclass(frozen=True)
class Volume:
    """A pod volume; `kind` is "configMap", "emptyDir", "persistentVolumeClaim", "secret", ...."""

    name: str
    kind: str
    source: dict[str, Any]  # the volume source as rendered, e.g. {"name": "cm", "items": [...]}


@dataclass(frozen=True)
class ContainerPort:
    """A port the container declares; `protocol` defaults to TCP as the API server sets it."""

    name: str | None
    container_port: int
    protocol: str


@dataclass(frozen=True)
class Container:
    """One container with its environment expanded exactly as the kubelet expands it."""

    name: str
    image: str
    command: list[str]  # after $(VAR) expansion; empty: the image's entrypoint
    args: list[str]  # after $(VAR) expansion
    environment: Mapping[str, str]  # ordered as the kubelet builds it: envFrom, then env
    unresolved: list[EnvironmentReference]  # Secret/ConfigMap references not in the manifests
    volume_mounts: list[VolumeMount]
    ports: list[ContainerPort]
    working_dir: str | None
    resources: dict[str, Any]
    skipped_environment_names: list[str] = field(default_factory=list)  # invalid envFrom keys


@dataclass(frozen=True)
class Pod:
    """A pod `J-R-i` of StatefulSet `J-R`, with the labels the controller adds."""

    name: str
    namespace: str | None
    owner_kind: str  # "StatefulSet"
    owner_name: str
    index: int
    hostname: str  # = name for StatefulSet pods
    subdomain: str | None  # = spec.serviceName
    # template labels + apps.kubernetes.io/pod-index + statefulset.kubernetes.io/pod-name
    labels: dict[str, str]
    annotations: dict[str, str]
    containers: list[Container]
    init_containers: list[Container]
    volumes: list[Volume]
    restart_policy: str
    termination_grace_period_seconds: int
    spec: dict[str, Any] = field(repr=False, default_factory=dict)  # the rendered pod spec


# Stand-ins for a pod's name and ordinal while a template is expanded once for all its pods.
# Private-use characters: a template or value holding one is expanded pod by pod instead.


def environment_sources(
    objects: Sequence[KubernetesObject],
    namespace: str | None,
    secrets: Mapping[tuple[str, str], str] | None = None,
) -> EnvironmentSources:
    """ConfigMaps and Secrets a pod in `namespace` can read: those rendered, then `secrets`.

    A Secret the manifests create takes its values from the manifests (`stringData` over
    `data`), as the API server would store it; `secrets` fills in the ones they do not create.
    """
    config_maps: dict[str, dict[str, str]] = {}
    secret_values: dict[tuple[str, str], str] = {}
    rendered_secrets: set[str] = set()
    for candidate in objects:
        if namespace_of(candidate) != namespace:
            continue
        if candidate.get("kind") == "ConfigMap":
            data = candidate.get("data") or {}
            config_maps[name_of(candidate)] = {str(key): str(value) for key, value in data.items()}
        elif candidate.get("kind") == "Secret":
            secret_name = name_of(candidate)
            rendered_secrets.add(secret_name)
            for key, value in _secret_data(candidate).items():
                secret_values[(secret_name, key)] = value
    for (secret_name, key), value in (secrets or {}).items():
        if secret_name not in rendered_secrets:
            secret_values[(secret_name, key)] = value
    return EnvironmentSources(config_maps=config_maps, secrets=secret_values)


def pod_from_template(
    *,
    name: str,
    namespace: str | None,
    owner_kind: str,
    owner_name: str,
    index: int,
    template: Mapping[str, Any],
    extra_labels: Mapping[str, str],
    hostname: str,
    subdomain: str | None,
    sources: EnvironmentSources,
    runtime_fields: Mapping[str, str] | None = None,
    service_environment: Mapping[str, str] | None = None,
    strict_environment_names: bool = False,
) -> Pod:
    """The pod a controller creates from `template`, with the labels it adds (`extra_labels`)."""
    metadata = template.get("metadata") or {}
    spec: dict[str, Any] = dict(template.get("spec") or {})
    labels = {str(key): str(value) for key, value in (metadata.get("labels") or {}).items()}
    labels.update(extra_labels)
    annotations = {
        str(key): str(value) for key, value in (metadata.get("annotations") or {}).items()
    }
    containers_by_name = {
        str(container.get("name", "")): container
        for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
    }
    downward_api = DownwardApi(
        name=name,
        namespace=namespace,
        labels=labels,
        annotations=annotations,
        service_account_name=str(
            spec.get("serviceAccountName") or spec.get("serviceAccount") or "default"
        ),
        runtime_fields=dict(runtime_fields or {}),
        containers=containers_by_name,
    )

    def build(container: Mapping[str, Any]) -> Container:
        return _container(
            container, downward_api, sources, service_environment, strict_environment_names
        )

    return Pod(
        name=name,
        namespace=namespace,
        owner_kind=owner_kind,
        owner_name=owner_name,
        index=index,
        hostname=hostname,
        subdomain=subdomain,
        labels=labels,
        annotations=annotations,
        containers=[build(container) for container in spec.get("containers") or []],
        init_containers=[build(container) for container in spec.get("initContainers") or []],
        volumes=[_volume(volume) for volume in spec.get("volumes") or []],
        restart_policy=str(spec.get("restartPolicy") or "Always"),
        termination_grace_period_seconds=int(spec.get("terminationGracePeriodSeconds", 30)),
        spec=spec,
    )


def _container(
    container: Mapping[str, Any],
    downward_api: DownwardApi,
    sources: EnvironmentSources,
    service_environment: Mapping[str, str] | None,
    strict_environment_names: bool,
) -> Container:
    environment = build_environment(
        container,
        downward_api,
        sources,
        service_environment=service_environment,
        strict_names=strict_environment_names,
    )
    variables = environment.variables
    return Container(
        name=str(container.get("name", "")),
        image=str(container.get("image", "")),
        command=expand_arguments(container.get("command"), variables),
        args=expand_arguments(container.get("args"), variables),
        environment=variables,
        unresolved=environment.unresolved,
        volume_mounts=[
            _volume_mount(mount, variables) for mount in container.get("volumeMounts") or []
        ],
        ports=[
            ContainerPort(
                name=port.get("name"),
                container_port=int(port.get("containerPort", 0)),
                protocol=str(port.get("protocol") or "TCP"),
            )
            for port in container.get("ports") or []
        ],
        working_dir=container.get("workingDir"),
        resources=dict(container.get("resources") or {}),
        skipped_environment_names=environment.skipped_names,
    )


def _volume_mount(mount: Mapping[str, Any], environment: Mapping[str, str]) -> VolumeMount:
    expression = mount.get("subPathExpr")
    sub_path = mount.get("subPath") or None
    if expression:
        # The kubelet refuses a subPathExpr naming a variable that is unset or empty.
        missing: list[str] = []

        def lookup(variable: str) -> str:
            value = environment.get(variable, "")
            if not value:
                missing.append(variable)
            return value

        expanded = expand_with(str(expression), lookup)
        sub_path = None if missing else expanded
    return VolumeMount(
        volume_name=str(mount.get("name", "")),
        mount_path=str(mount.get("mountPath", "")),
        read_only=bool(mount.get("readOnly", False)),
        sub_path=sub_path,
        sub_path_expression=str(expression) if expression else None,
    )


def _volume(volume: Mapping[str, Any]) -> Volume:
    kinds = [key for key in volume if key != "name"]
    kind = kinds[0] if kinds else "emptyDir"
    source = volume.get(kind)
    return Volume(
        name=str(volume.get("name", "")),
        kind=kind,
        source=dict(source) if isinstance(source, dict) else {},
    )


def _secret_data(secret: KubernetesObject) -> dict[str, str]:
    values: dict[str, str] = {}
    for key, encoded in (secret.get("data") or {}).items():
        try:
            values[str(key)] = base64.b64decode(str(encoded), validate=True).decode(
                "utf-8", errors="replace"
            )
        except (binascii.Error, ValueError):
            continue
    for key, value in (secret.get("stringData") or {}).items():
        values[str(key)] = str(value)
    return values
