"""Render a kustomization that only lists files beside it, in process, as Kustomize would.

`tfcompile build` writes each job's `kustomization.yaml` as an `apiVersion`, a `kind` and a
`resources:` list naming one file per object in the same directory: no components, patches,
generators, prefixes or any other field. Kustomize's whole work on such a directory is to read
the objects, refuse two with the same identity, and sort them in its legacy order (kinds in a
fixed order, then group, version, kind, namespace and name); no field changes. `validate` of many
jobs spent most of its time starting a Kustomize process per job for that, so this module does
the same reading and sorting in Python, for that shape alone, checked strictly:

- the directory and every file are opened without following links (`directory_handles`), the
  kustomization is the only kustomization file there, it has no field but `apiVersion:
  kustomize.config.k8s.io/v1beta1`, `kind: Kustomization` and `resources`, and every resource
  is a plain `.yaml` file name, listed once;
- every file holds exactly one document, with no directive, document marker or merge key, that
  is an object with string `apiVersion`, `kind`, `metadata.name` (and `metadata.namespace`, if
  any), of no `List` or `Namespace` kind, with only strings, booleans, integers, finite
  floats, lists and mappings with string keys (no null, timestamp or binary value, whose text
  Kustomize may write back differently);
- no two objects share a kind, namespace and name.

Anything else returns None and the caller runs Kustomize, which renders it or fails with its own
message. tests/test_plain_files.py compares this render with Kustomize's, object by object and in
order, for every example and for generated jobs, and shows each refused shape going to Kustomize.
"""

from __future__ import annotations

import errno
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfcompile.compiler.output.directory_handles import Directory
from tfcompile.compiler.output.errors import OutputEnvironmentError
from tfcompile.compiler.yaml_input import YamlInputError, read_generated_document, read_manifests

from .manifests import KubernetesObject
from .remote_resources import KUSTOMIZATION_FILE_NAMES

KUSTOMIZATION_API_VERSION = "kustomize.config.k8s.io/v1beta1"
_KUSTOMIZATION_FIELDS = frozenset({"apiVersion", "kind", "resources"})
_PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\.yaml")
# A directive, a document marker or a merge key: YAML that one file-per-object text never needs.
_UNUSUAL_YAML = re.compile(r"^(?:%|---|\.\.\.)|<<", re.MULTILINE)

# Kustomize's legacy order (`kustomize build --reorder legacy`, its default; the same lists in
# sortOptions.legacySortOptions): these kinds first, in this order, these last, the rest between.
_ORDER_FIRST = (
    "Namespace", "ResourceQuota", "StorageClass", "CustomResourceDefinition", "ServiceAccount",
    "PodSecurityPolicy", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding", "ConfigMap",
    "Secret", "Endpoints", "Service", "LimitRange", "PriorityClass", "PersistentVolume",
    "PersistentVolumeClaim", "Deployment", "StatefulSet", "CronJob", "PodDisruptionBudget",
)
_ORDER_LAST = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
_KIND_RANKS = {
    **{kind: position - len(_ORDER_FIRST) for position, kind in enumerate(_ORDER_FIRST)},
    **{kind: position + 1 for position, kind in enumerate(_ORDER_LAST)},
}


@dataclass(frozen=True)
class PlainRender:
    """The objects Kustomize would render, in its order, and their files' text in that order."""

    objects: list[KubernetesObject]
    text: str


@dataclass(frozen=True)
class _Entry:
    group: str
    version: str
    kind: str
    namespace: str
    name: str
    text: str
    document: KubernetesObject

    def gvk_text(self) -> str:
        """Kustomize's `Gvk.String()`."""
        return ".".join([self.kind or "[noKind]", self.version or "[noVer]",
                         self.group or "[noGrp]"])

    def sort_gvk(self) -> str:
        return "_".join([self.group or "~G", self.version or "~V", self.kind or "~K"])

    def sort_id(self) -> str:
        return "|".join([self.gvk_text(), self.namespace or "~X", self.name or "~N"])


def render_plain_files(directory: Path) -> PlainRender | None:
    """What Kustomize renders from `directory`, when its kustomization only lists plain files
    beside it (see the module's docstring); None for anything else, to be left to Kustomize."""
    try:
        descriptor = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
                             | os.O_CLOEXEC)
    except OSError as error:
        if error.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.EACCES):
            return None
        raise
    try:
        with Directory(descriptor, directory, str(directory)) as opened:
            return _render(opened)
    except OutputEnvironmentError:
        return None


def _render(directory: Directory) -> PlainRender | None:
    if any(directory.status(name) is not None for name in KUSTOMIZATION_FILE_NAMES[1:]):
        return None
    text = directory.read(KUSTOMIZATION_FILE_NAMES[0])
    if text is None or _UNUSUAL_YAML.search(text):
        return None
    try:
        kustomization = read_generated_document(text)
    except YamlInputError:
        return None
    if (
        not isinstance(kustomization, dict)
        or set(kustomization) != _KUSTOMIZATION_FIELDS
        or kustomization["apiVersion"] != KUSTOMIZATION_API_VERSION
        or kustomization["kind"] != "Kustomization"
        or not isinstance(kustomization["resources"], list)
    ):
        return None
    names: list[str] = kustomization["resources"]
    if len(set(names)) != len(names) or not all(
        isinstance(name, str) and _PLAIN_NAME.fullmatch(name) for name in names
    ):
        return None
    entries: list[_Entry] = []
    identities: set[tuple[str, str, str]] = set()
    for name in names:
        entry = _entry(directory, name)
        if entry is None:
            return None
        # Kustomize counts "default" and no namespace as the same one.
        identity = (entry.kind, "" if entry.namespace == "default" else entry.namespace,
                    entry.name)
        if identity in identities:
            return None
        identities.add(identity)
        entries.append(entry)
    ordered = sorted(entries, key=_legacy_order)
    return PlainRender(
        objects=[entry.document for entry in ordered],
        text="".join(f"---\n{entry.text}" if entry.text.endswith("\n")
                     else f"---\n{entry.text}\n" for entry in ordered),
    )


def _entry(directory: Directory, name: str) -> _Entry | None:
    text = directory.read(name)
    if text is None or _UNUSUAL_YAML.search(text):
        return None
    try:
        documents = [document for document in read_manifests(text) if document is not None]
    except YamlInputError:
        return None
    if len(documents) != 1 or not _plain_object(documents[0]):
        return None
    document: KubernetesObject = documents[0]
    api_version, kind, metadata = document["apiVersion"], document["kind"], document["metadata"]
    group, _, version = api_version.rpartition("/")
    # Kustomize orders Namespace kinds of different groups in an order of their own.
    if api_version.count("/") > 1 or kind.endswith("List") or kind == "Namespace":
        return None
    return _Entry(group, version, kind, metadata.get("namespace", ""), metadata["name"], text,
                  document)


def _plain_object(document: Any) -> bool:
    if not isinstance(document, dict) or not _plain(document):
        return False
    metadata = document.get("metadata")
    return (
        isinstance(document.get("apiVersion"), str) and bool(document["apiVersion"])
        and isinstance(document.get("kind"), str) and bool(document["kind"])
        and isinstance(metadata, dict)
        and isinstance(metadata.get("name"), str) and bool(metadata["name"])
        and isinstance(metadata.get("namespace", ""), str)
    )


def _plain(value: Any) -> bool:
    """Only what Kustomize writes back as it read it: no null, timestamp or binary value."""
    if isinstance(value, dict):
        return all(isinstance(key, str) and _plain(item) for key, item in value.items())
    if isinstance(value, list):
        return all(_plain(item) for item in value)
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, str | bool | int)


def _legacy_order(entry: _Entry) -> tuple[int, str, str]:
    """Kustomize's legacy sort key: the kind's rank, the group, version and kind, then the id."""
    return _KIND_RANKS.get(entry.kind, 0), entry.sort_gvk(), entry.sort_id()


__all__ = ["PlainRender", "render_plain_files"]
