"""Which Kubernetes versions the output can be checked against, and the default one.

The schemas come from the `kubernetes-validate` package, which ships one strict, offline schema
set per Kubernetes minor version. The default is 1.33: validating against an older, widely
deployed minor is the cautious choice, since its strict schemas reject fields that later
versions added, so output that passes 1.33 also applies to newer clusters. 1.28 is the oldest
accepted because the compiled pods read their task index from the `apps.kubernetes.io/pod-index`
label, which the StatefulSet controller sets from 1.28 on.
"""

from __future__ import annotations

import re
from importlib import resources
from importlib.resources.abc import Traversable

from tfcompile.compiler.kubernetes_versions import (
    DEFAULT_KUBERNETES_VERSION,
    OLDEST_KUBERNETES_VERSION,
)

__all__ = [
    "DEFAULT_KUBERNETES_VERSION",
    "OLDEST_KUBERNETES_VERSION",
    "KubernetesVersionError",
    "known_versions",
    "normalize_version",
    "schema_directory",
]

_SCHEMA_DIRECTORY = re.compile(r"v(?P<major>\d+)\.(?P<minor>\d+)\.\d+-local-strict")
_VERSION = re.compile(r"v?(?P<major>\d+)\.(?P<minor>\d+)(?:\.\d+)?")


class KubernetesVersionError(ValueError):
    """A Kubernetes version the installed schemas cannot check; the message lists the known ones."""


def known_versions() -> list[str]:
    """The minor versions (`1.28`, ...) with strict schemas installed, oldest first."""
    return [version for version, _ in _schema_directories()]


def schema_directory(kubernetes_version: str) -> Traversable:
    """The strict schema directory for a version given as `1.33`, `v1.33` or `1.33.2`."""
    minor = normalize_version(kubernetes_version)
    for version, directory in _schema_directories():
        if version == minor:
            return directory
    raise KubernetesVersionError(_unknown(kubernetes_version))


def normalize_version(kubernetes_version: str) -> str:
    """`major.minor` of a version, refusing ones older than `OLDEST_KUBERNETES_VERSION`."""
    match = _VERSION.fullmatch(kubernetes_version.strip())
    if match is None:
        raise KubernetesVersionError(_unknown(kubernetes_version))
    minor = f"{int(match.group('major'))}.{int(match.group('minor'))}"
    if _sort_key(minor) < _sort_key(OLDEST_KUBERNETES_VERSION):
        raise KubernetesVersionError(
            f"Kubernetes {minor} is too old: the compiled pods read their task index from the "
            f"apps.kubernetes.io/pod-index label, set by StatefulSets from "
            f"{OLDEST_KUBERNETES_VERSION} on; choose one of {', '.join(known_versions())}"
        )
    return minor


def _unknown(kubernetes_version: str) -> str:
    return (
        f"unknown Kubernetes version {kubernetes_version!r}: the installed schemas cover "
        f"{', '.join(known_versions())} (give major.minor, e.g. {DEFAULT_KUBERNETES_VERSION})"
    )


def _schema_directories() -> list[tuple[str, Traversable]]:
    root = resources.files("kubernetes_validate").joinpath("kubernetes-json-schema")
    found: list[tuple[str, Traversable]] = []
    for entry in root.iterdir():
        match = _SCHEMA_DIRECTORY.fullmatch(entry.name)
        if match is None:
            continue
        version = f"{int(match.group('major'))}.{int(match.group('minor'))}"
        if _sort_key(version) >= _sort_key(OLDEST_KUBERNETES_VERSION):
            found.append((version, entry))
    return sorted(found, key=lambda item: _sort_key(item[0]))


def _sort_key(version: str) -> tuple[int, int]:
    major, minor = version.split(".")
    return int(major), int(minor)
