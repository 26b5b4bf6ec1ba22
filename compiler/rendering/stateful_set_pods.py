"""The pods a StatefulSet would create, as its controller names them and the kubelet runs them.

`pods_of` plays the StatefulSet controller (pod names, ordinals and the identity labels it
adds) over `pods.pod_from_template`, the kubelet's side. A StatefulSet's pods differ only in
their name and ordinal, so its template is expanded once, with stand-ins for those two, and
each pod puts its own in where they appear (expansion inserts values verbatim and never re-reads
them, so this is exactly the per-pod expansion). A pod's environment is computed when read: a
2,000-task job's `TF_CONFIG` exists once, not per pod.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from tfcompile.compiler.objects.labels import POD_INDEX_LABEL

from .environment import EnvironmentSources
from .manifests import KubernetesObject, name_of, namespace_of, objects_of_kind
from .pods import Container, Pod, environment_sources, pod_from_template

POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"


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
