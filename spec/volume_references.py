"""The objects a pod volume names: claims, ConfigMaps, Secrets and the like, and their names.

Kubernetes names a PersistentVolumeClaim, ConfigMap, Secret or StorageClass with a DNS
subdomain (RFC 1123: lowercase letters, digits, '-' and '.', starting and ending with a letter
or digit, at most 253 characters), so a name is never a path: no '/', no '..', nothing absolute.
`build` refuses any other name in a `podTemplate` volume (`pod_rules`), and `run-local`, which
makes a directory per claim, refuses one again in the manifests it is given (defence in depth).

Only the standard library: `run-local` reads this without loading the spec models.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

MAXIMUM_NAME_LENGTH = 253
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")

NAME_RULE = ("a DNS subdomain: lowercase letters, digits, '-' and '.', starting and ending "
             f"with a letter or digit, at most {MAXIMUM_NAME_LENGTH} characters")


def is_object_name(value: object) -> bool:
    """Whether `value` is a name Kubernetes gives a claim, ConfigMap or Secret."""
    return (isinstance(value, str) and len(value) <= MAXIMUM_NAME_LENGTH
            and _DNS_SUBDOMAIN.fullmatch(value) is not None)


@dataclass(frozen=True)
class Reference:
    """A field of a volume source that names an object: where it is (below the volume), the
    kind of object, and whether Kubernetes requires it."""

    path: tuple[str | int, ...]
    kind: str
    required: bool


_SECRET_REFERENCE = ("secretRef", "name")

_REFERENCES: dict[str, tuple[Reference, ...]] = {
    "persistentVolumeClaim": (Reference(("claimName",), "PersistentVolumeClaim", True),),
    "configMap": (Reference(("name",), "ConfigMap", True),),
    "secret": (Reference(("secretName",), "Secret", True),),
    "azureFile": (Reference(("secretName",), "Secret", True),),
    "csi": (Reference(("nodePublishSecretRef", "name"), "Secret", False),),
    "cephfs": (Reference(_SECRET_REFERENCE, "Secret", False),),
    "rbd": (Reference(_SECRET_REFERENCE, "Secret", False),),
    "flexVolume": (Reference(_SECRET_REFERENCE, "Secret", False),),
    "iscsi": (Reference(_SECRET_REFERENCE, "Secret", False),),
    "scaleIO": (Reference(_SECRET_REFERENCE, "Secret", False),),
    "storageos": (Reference(_SECRET_REFERENCE, "Secret", False),),
    "ephemeral": (
        Reference(("volumeClaimTemplate", "spec", "storageClassName"), "StorageClass", False),
        Reference(("volumeClaimTemplate", "spec", "volumeName"), "PersistentVolume", False),
        Reference(("volumeClaimTemplate", "spec", "dataSource", "name"), "data source",
                  False),
        Reference(("volumeClaimTemplate", "spec", "dataSourceRef", "name"), "data source",
                  False),
    ),
}
_PROJECTED_SOURCES = {"configMap": "ConfigMap", "secret": "Secret"}


@dataclass(frozen=True)
class NameProblem:
    """A name that is missing or is not an object name: its path below the volume (the volume
    source's key first) and what is wrong."""

    path: tuple[str | int, ...]
    message: str


def _lookup(source: Mapping[str, Any], path: tuple[str | int, ...]) -> tuple[bool, object]:
    node: object = source
    for part in path:
        listed = isinstance(part, int) and isinstance(node, list) and 0 <= part < len(node)
        if not listed and not (isinstance(node, Mapping) and part in node):
            return False, None
        node = node[part]  # type: ignore[index]
    return True, node


def _judge(kind_key: str, source: Mapping[str, Any],
           reference: Reference) -> Iterator[NameProblem]:
    present, value = _lookup(source, reference.path)
    where = (kind_key, *reference.path)
    if not present:
        if reference.required:
            yield NameProblem(where, f"the {reference.kind}'s name is required: {NAME_RULE}")
        return
    if not is_object_name(value):
        yield NameProblem(where, f"must be the name of a {reference.kind}, {NAME_RULE} (a "
                          "name, never a path)")


def volume_name_problems(volume: Mapping[str, Any]) -> Iterator[NameProblem]:
    """Every name in a pod volume (one item of `spec.volumes`) that is not an object name."""
    for kind_key, source in volume.items():
        if not isinstance(source, Mapping):
            continue
        for reference in _REFERENCES.get(str(kind_key), ()):
            yield from _judge(str(kind_key), source, reference)
        if kind_key == "projected":
            sources = source.get("sources")
            for index, item in enumerate(sources if isinstance(sources, list) else []):
                if not isinstance(item, Mapping):
                    continue
                for key, kind in _PROJECTED_SOURCES.items():
                    if isinstance(item.get(key), Mapping):
                        yield from _judge("projected", source,
                                          Reference(("sources", index, key, "name"), kind, True))
