"""What a bound pod reads from the API server before it can start, fetched as the kubelet does.

The compiled pods name ConfigMaps (the script), Secrets (credentials), PersistentVolumeClaims
(shared storage) and, through the ServiceAccount admission plugin, a projected service-account
volume. The agent fetches exactly the objects the pod names, with the node's own credentials (the
API server's Node authorizer lets a node read what its pods reference, nothing else), and turns
them into what `rendering` and `local_run` take: ConfigMap data, Secret values, claim directories.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfcompile.compiler.rendering.environment import EnvironmentSources

from .api import ApiClient

CONFIG_MAP = "ConfigMap"
SECRET = "Secret"


class NotReadyYet(Exception):
    """The pod cannot start yet (a claim is not bound, ...); the message says why."""


@dataclass
class PodSources:
    """The ConfigMaps, Secrets and claim directories one pod needs."""

    config_maps: dict[str, dict[str, str]] = field(default_factory=dict)
    secrets: dict[tuple[str, str], str] = field(default_factory=dict)

    def environment_sources(self) -> EnvironmentSources:
        return EnvironmentSources(config_maps=self.config_maps, secrets=self.secrets)


def _references_in_containers(spec: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        for source in container.get("envFrom") or []:
            if source.get("configMapRef"):
                yield CONFIG_MAP, str(source["configMapRef"].get("name", ""))
            if source.get("secretRef"):
                yield SECRET, str(source["secretRef"].get("name", ""))
        for variable in container.get("env") or []:
            value_from = variable.get("valueFrom") or {}
            if value_from.get("configMapKeyRef"):
                yield CONFIG_MAP, str(value_from["configMapKeyRef"].get("name", ""))
            if value_from.get("secretKeyRef"):
                yield SECRET, str(value_from["secretKeyRef"].get("name", ""))


def _references_in_volumes(spec: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    for volume in spec.get("volumes") or []:
        if volume.get("configMap"):
            yield CONFIG_MAP, str(volume["configMap"].get("name", ""))
        if volume.get("secret"):
            yield SECRET, str(volume["secret"].get("secretName", ""))
        for projection in (volume.get("projected") or {}).get("sources") or []:
            if projection.get("configMap"):
                yield CONFIG_MAP, str(projection["configMap"].get("name", ""))
            if projection.get("secret"):
                yield SECRET, str(projection["secret"].get("name", ""))


def referenced_objects(spec: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(kind, name) of every ConfigMap and Secret the pod spec names, once each, in order."""
    found = [*_references_in_volumes(spec), *_references_in_containers(spec)]
    return list(dict.fromkeys(reference for reference in found if reference[1]))


def _decoded(data: Mapping[str, Any]) -> dict[str, str]:
    values: dict[str, str] = {}
    for key, encoded in data.items():
        try:
            values[str(key)] = base64.b64decode(str(encoded), validate=True).decode(
                "utf-8", errors="replace")
        except (binascii.Error, ValueError):
            continue
    return values


def fetch_sources(client: ApiClient, namespace: str, spec: Mapping[str, Any]) -> PodSources:
    """The ConfigMaps and Secrets the pod names that exist (a missing one is simply absent:
    `rendering` reports optional and mandatory references as the kubelet judges them)."""
    sources = PodSources()
    for kind, name in referenced_objects(spec):
        resource = "configmaps" if kind == CONFIG_MAP else "secrets"
        found = client.get_or_none(f"/api/v1/namespaces/{namespace}/{resource}/{name}")
        if found is None:
            continue
        if kind == CONFIG_MAP:
            sources.config_maps[name] = {str(k): str(v) for k, v in
                                         (found.get("data") or {}).items()}
        else:
            for key, value in _decoded(found.get("data") or {}).items():
                sources.secrets[(name, key)] = value
    return sources


def claim_names(spec: Mapping[str, Any]) -> list[str]:
    return [str(volume["persistentVolumeClaim"].get("claimName", ""))
            for volume in spec.get("volumes") or [] if volume.get("persistentVolumeClaim")]


def check_claims(client: ApiClient, namespace: str, spec: Mapping[str, Any],
                 claims_directory: Path) -> None:
    """Every claim the pod mounts must be bound to a volume of this node's directory for it
    (see `claims`); raises NotReadyYet otherwise."""
    for name in claim_names(spec):
        claim = client.get_or_none(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{name}")
        if claim is None:
            raise NotReadyYet(f"persistentvolumeclaim {name!r} not found")
        volume_name = (claim.get("spec") or {}).get("volumeName")
        if (claim.get("status") or {}).get("phase") != "Bound" or not volume_name:
            raise NotReadyYet(f"persistentvolumeclaim {name!r} is not bound yet")
        volume = client.get_or_none(f"/api/v1/persistentvolumes/{volume_name}")
        path = ((volume or {}).get("spec") or {}).get("hostPath", {}).get("path")
        if path != str(claims_directory / name):
            raise NotReadyYet(f"persistentvolumeclaim {name!r} is bound to volume "
                              f"{volume_name!r}, which is not a directory of this node")
