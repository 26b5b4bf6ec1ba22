"""Which Kubernetes versions the output can be checked against, and the default one.

The command line names the two constants in `--help`, `validate` picks a schema set by them, and
the CI `init` writes passes kubeconform the same default, so they live here, below all three
(nothing heavy is imported: the schema files are looked at only when asked for).

The schemas come from the `kubernetes-validate` package, which ships one strict, offline schema
set per Kubernetes minor version. The default is 1.33: validating against an older, widely
deployed minor is the cautious choice, since its strict schemas reject fields that later
versions added, so output that passes 1.33 also applies to newer clusters. 1.28 is the oldest
accepted because the compiled pods read their task index from the `apps.kubernetes.io/pod-index`
label, which the StatefulSet controller sets from 1.28 on.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

DEFAULT_KUBERNETES_VERSION = "1.33"
OLDEST_KUBERNETES_VERSION = "1.28"
ADMISSION_POLICY_KUBERNETES_VERSION = "1.30"
"""ValidatingAdmissionPolicy is GA (admissionregistration.k8s.io/v1) from here on: older
clusters cannot enforce the launcher policy that `init` writes."""

__all__ = [
    "ADMISSION_POLICY_KUBERNETES_VERSION",
    "DEFAULT_KUBERNETES_VERSION",
    "OLDEST_KUBERNETES_VERSION",
    "KubernetesVersionError",
    "known_versions",
    "kubeconform_version",
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


def kubeconform_version(kubernetes_version: str) -> str:
    """The `-kubernetes-version` kubeconform needs for a minor version: `1.33` -> `1.33.0`
    (the release the installed schemas were generated from)."""
    name = schema_directory(kubernetes_version).name
    return name.removeprefix("v").removesuffix("-local-strict")


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
    import importlib.util
    from importlib import resources
    from pathlib import Path

    # Found without importing the package (its utilities load PyYAML, 10 ms of every
    # `validate`): only its schema files are read.
    found_package = importlib.util.find_spec("kubernetes_validate")
    locations = found_package.submodule_search_locations if found_package else None
    root: Traversable = (Path(locations[0]) if locations
                         else resources.files("kubernetes_validate")).joinpath(
                             "kubernetes-json-schema")
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
