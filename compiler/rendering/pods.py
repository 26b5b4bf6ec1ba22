"""The pods a set of rendered manifests would create, as the StatefulSet controller names them.

The data types below are the contract between `rendering` (which builds them) and its two users,
`validation` and `local_run`. `pods_of` plays the StatefulSet controller (pod names, ordinals and
the identity labels it adds) and the kubelet (environment, command and arguments after `$(VAR)`
expansion), so both users judge what a cluster would run rather than what the compiler meant.

A StatefulSet's pods differ only in their name and ordinal, so its template is expanded once,
with stand-ins for those two, and each pod puts its own in where they appear (expansion inserts
values verbatim and never re-reads them, so this is exactly the per-pod expansion). A pod's
environment is computed when read: a 2,000-task job's `TF_CONFIG` exists once, not per pod.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
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
    objects_of_kind,
)

__all__ = [
    "POD_INDEX_LABEL",
    "POD_NAME_LABEL",
    "Container",
    "ContainerPort",
    "EnvironmentReference",
    "Pod",
    "Volume",
    "VolumeMount",
    "environment_sources",
    "ordinal_start_of",
    "pod_from_template",
    "pods_of",
    "replicas_of",
]

POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"


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


def pods_of(
    objects: Sequence[KubernetesObject],
    secrets: Mapping[tuple[str, str], str] | None = None,
    pod_ips: Mapping[str, str] | None = None,
    runtime_fields: Mapping[str, Mapping[str, str]] | None = None,
    service_environment: Mapping[str, str] | None = None,
    strict_environment_names: bool = False,
) -> list[Pod]:
    """Every pod the StatefulSets in `objects` would create, in rendered order, then by ordinal.

    `secrets` supplies values of Secrets the manifests do not create: `{(name, key): value}`.
    `pod_ips` maps a pod name to its IP (`status.podIP`/`status.podIPs`); `runtime_fields` maps a
    pod name to further field values only a running pod has (`spec.nodeName`, `metadata.uid`,
    ...). `service_environment` is what the kubelet adds for Services (`KUBERNETES_*`).
    `strict_environment_names`: skip `envFrom` keys as kubelets before 1.32 do.
    """
    pods: list[Pod] = []
    for stateful_set in objects_of_kind(objects, "StatefulSet"):
        namespace = namespace_of(stateful_set)
        controller = _Controller(
            stateful_set=stateful_set,
            sources=environment_sources(objects, namespace, secrets),
            service_environment=service_environment,
            strict_environment_names=strict_environment_names,
        )
        pods.extend(controller.pods(pod_ips, runtime_fields))
    return pods


@dataclass(frozen=True)
class _Controller:
    """The StatefulSet controller and the kubelet for the pods of one StatefulSet."""

    stateful_set: KubernetesObject
    sources: EnvironmentSources
    service_environment: Mapping[str, str] | None
    strict_environment_names: bool

    def pods(
        self,
        pod_ips: Mapping[str, str] | None,
        runtime_fields: Mapping[str, Mapping[str, str]] | None,
    ) -> list[Pod]:
        owner = name_of(self.stateful_set)
        replicas, start = replicas_of(self.stateful_set), ordinal_start_of(self.stateful_set)
        shared = None
        if replicas > 1 and _free_of_stand_ins(
            self._template(), self.sources, self.service_environment
        ):
            shared = self.pod(start, _NAME_STAND_IN, _INDEX_STAND_IN, {})
        pods: list[Pod] = []
        for ordinal in range(start, start + replicas):
            pod_name = f"{owner}-{ordinal}"
            fields = dict((runtime_fields or {}).get(pod_name, {}))
            if pod_ips is not None and pod_name in pod_ips:
                fields.setdefault("status.podIP", pod_ips[pod_name])
                fields.setdefault("status.podIPs", pod_ips[pod_name])
            if shared is None or fields:
                pods.append(self.pod(ordinal, pod_name, str(ordinal), fields))
            else:
                pods.append(_pod_of_shared(shared, pod_name, ordinal))
        return pods

    def pod(self, ordinal: int, name: str, index: str, fields: Mapping[str, str]) -> Pod:
        spec = self.stateful_set.get("spec") or {}
        return pod_from_template(
            name=name,
            namespace=namespace_of(self.stateful_set),
            owner_kind="StatefulSet",
            owner_name=name_of(self.stateful_set),
            index=ordinal,
            template=self._template(),
            extra_labels={POD_NAME_LABEL: name, POD_INDEX_LABEL: index},
            hostname=name,
            subdomain=spec.get("serviceName") or None,
            sources=self.sources,
            runtime_fields=fields,
            service_environment=self.service_environment,
            strict_environment_names=self.strict_environment_names,
        )

    def _template(self) -> Mapping[str, Any]:
        template: Mapping[str, Any] = (self.stateful_set.get("spec") or {}).get("template") or {}
        return template


# Stand-ins for a pod's name and ordinal while a template is expanded once for all its pods.
# Private-use characters: a template or value holding one is expanded pod by pod instead.
_STAND_IN_MARK = "\ue000"
_NAME_STAND_IN = _STAND_IN_MARK + "pod-name\ue001"
_INDEX_STAND_IN = _STAND_IN_MARK + "pod-ordinal\ue001"


_STAND_IN = re.compile(f"({re.escape(_NAME_STAND_IN)}|{re.escape(_INDEX_STAND_IN)})")


@functools.lru_cache(maxsize=1024)
def _pieces(text: str) -> list[str]:
    """`text` cut at its stand-ins, which are pieces of their own."""
    return _STAND_IN.split(text)


def _free_of_stand_ins(
    template: Mapping[str, Any],
    sources: EnvironmentSources,
    service_environment: Mapping[str, str] | None,
) -> bool:
    texts = json.dumps(
        [template, dict(service_environment or {}), sources.config_maps,
         sorted(sources.secrets.items())],
        ensure_ascii=False,
        default=str,
    )
    return _STAND_IN_MARK not in texts


class _PodEnvironment(Mapping[str, str]):
    """A container's environment in one pod: the shared template's, each value read with the
    pod's own name and ordinal put in for the stand-ins."""

    __slots__ = ("_put_in", "_template")

    def __init__(self, template: Mapping[str, str], put_in: Callable[[str], str]) -> None:
        self._template = template
        self._put_in = put_in

    def __getitem__(self, name: str) -> str:
        return self._put_in(self._template[name])

    def __contains__(self, name: object) -> bool:
        return name in self._template

    def __iter__(self) -> Iterator[str]:
        return iter(self._template)

    def __len__(self) -> int:
        return len(self._template)

    def __repr__(self) -> str:
        return repr(dict(self))


def _pod_of_shared(shared: Pod, name: str, ordinal: int) -> Pod:
    """The pod `name` with ordinal `ordinal`, from the pod expanded with stand-ins."""
    index = str(ordinal)

    def put_in(text: str) -> str:
        if _STAND_IN_MARK not in text:
            return text
        values = {_NAME_STAND_IN: name, _INDEX_STAND_IN: index}
        return "".join(values.get(piece, piece) for piece in _pieces(text))

    def container(template: Container) -> Container:
        environment: Mapping[str, str] = template.environment
        if any(_STAND_IN_MARK in value for value in environment.values()):
            environment = _PodEnvironment(environment, put_in)
        return replace(
            template,
            command=[put_in(argument) for argument in template.command],
            args=[put_in(argument) for argument in template.args],
            environment=environment,
            volume_mounts=[
                replace(mount, sub_path=put_in(mount.sub_path))
                if mount.sub_path is not None
                else mount
                for mount in template.volume_mounts
            ],
        )

    return replace(
        shared,
        name=name,
        index=ordinal,
        hostname=name,
        labels={key: put_in(value) for key, value in shared.labels.items()},
        containers=[container(item) for item in shared.containers],
        init_containers=[container(item) for item in shared.init_containers],
    )


def replicas_of(stateful_set: KubernetesObject) -> int:
    """`spec.replicas`, 1 when unset or null as the API server defaults it."""
    replicas = (stateful_set.get("spec") or {}).get("replicas")
    return 1 if replicas is None else int(replicas)


def ordinal_start_of(stateful_set: KubernetesObject) -> int:
    """The first pod ordinal: `spec.ordinals.start`, 0 when unset."""
    start = ((stateful_set.get("spec") or {}).get("ordinals") or {}).get("start")
    return 0 if start is None else int(start)


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
