"""What Kustomize renders from a kustomization that only lists files, without running it.

Most of the directories `validate` sees are tfcompile's own output with no components: a
`kustomization.yaml` of `apiVersion`, `kind` and `resources:`, each resource one file of the same
directory holding one object. For such a kustomization Kustomize changes nothing but the order
of the objects (its default "legacy" order), and starting a Kustomize process costs more than all
of Python's checks of the job. So when, and only when, a directory is provably of that shape,
its objects are read here, in Kustomize's order; anything else (components, another field, a
path that is not a plain file name, a link, a file of several documents or none, a `List`, a
null, timestamp or binary value or a label or annotation that is not a string, two
objects of one kind and name, objects in several namespaces, one kind under two API versions)
returns None and the caller runs Kustomize, whose result (or error message) is then the
user's. tests/test_plain_kustomization.py compares both renderings object by object.

Kustomize's legacy order: kinds in `_FIRST` order, then every other kind by group, version and
kind, then the kinds in `_LAST`; objects of one kind by namespace and name.
"""

from __future__ import annotations

import math
import os
import re
import stat
from pathlib import Path
from typing import Any

from tfcompile.compiler.yaml_input import YamlInputError, read_manifests

from .manifests import KubernetesObject, json_object
from .remote_resources import KUSTOMIZATION_FILE_NAMES, read_kustomization

KUSTOMIZATION_API_VERSION = "kustomize.config.k8s.io/v1beta1"
PLAIN_FIELDS = {"apiVersion", "kind", "resources"}
_PLAIN_FILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\.yaml")
_MARKER_LINE = re.compile(r"^(?:---|\.\.\.|%|\ufeff)", re.MULTILINE)
_LARGEST_FILE_BYTES = 8 * 1024 * 1024
"""A resource file larger than this is left to Kustomize (tfcompile writes none so large)."""

_FIRST = (
    "Namespace", "ResourceQuota", "StorageClass", "CustomResourceDefinition", "ServiceAccount",
    "PodSecurityPolicy", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding",
    "ConfigMap", "Secret", "Endpoints", "Service", "LimitRange", "PriorityClass",
    "PersistentVolume", "PersistentVolumeClaim", "Deployment", "StatefulSet", "CronJob",
    "PodDisruptionBudget",
)
_LAST = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")


def render_plain(directory: Path, *, before_components: bool = False
                 ) -> list[KubernetesObject] | None:
    """The objects Kustomize would render from `directory`, in its order, or None when the
    directory is not provably a plain list of files. `before_components`: what it renders
    before the components its kustomization names, if it names any (the rendering the first
    component starts from)."""
    try:
        return _render(directory, before_components)
    except (OSError, UnicodeDecodeError, YamlInputError, ValueError):
        return None


def _render(directory: Path, before_components: bool) -> list[KubernetesObject] | None:
    present = [name for name in KUSTOMIZATION_FILE_NAMES if os.path.lexists(directory / name)]
    if present != ["kustomization.yaml"]:
        return None
    kustomization = read_kustomization(regular_file_text(directory / "kustomization.yaml"))
    if before_components and isinstance(kustomization, dict):
        kustomization = {key: value for key, value in kustomization.items()
                         if key != "components"}
    if kustomization is None or not _is_plain(kustomization):
        return None
    texts = [regular_file_text(directory / name) for name in kustomization["resources"]]
    found: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    for document in _one_document_each(texts):
        if not _is_object(document):
            return None
        found.append((_order(document), document))
    if not _one_identity_each(document for _, document in found):
        return None
    found.sort(key=lambda entry: entry[0])
    return [json_object(document) for _, document in found]


def _one_document_each(texts: list[str]) -> list[Any]:
    """The one document of each text, in order; ValueError when a text holds none or several.

    Files that cannot hold a second document (no line starts with a document marker, a
    directive or a byte order mark) and end in a line break are read in one pass, joined by
    document markers: starting a loader costs more than reading most of these small files.
    """
    if all(text.endswith("\n") and not _MARKER_LINE.search(text) for text in texts):
        documents = read_manifests("---\n".join(texts))
        if len(documents) == len(texts) and all(item is not None for item in documents):
            return documents
    each = []
    for text in texts:
        documents = [document for document in read_manifests(text) if document is not None]
        if len(documents) != 1:
            raise ValueError("not one document")
        each.append(documents[0])
    return each


def regular_file_text(path: Path) -> str:
    """The text of a regular file, never through a link; ValueError for anything else."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(descriptor, "rb") as handle:
        status = os.fstat(handle.fileno())
        if not stat.S_ISREG(status.st_mode) or status.st_size > _LARGEST_FILE_BYTES:
            raise ValueError(f"{path}: not a plain file")
        return handle.read(_LARGEST_FILE_BYTES + 1).decode("utf-8")


def _is_plain(kustomization: Any) -> bool:
    if not isinstance(kustomization, dict) or set(kustomization) != PLAIN_FIELDS:
        return False
    if kustomization["apiVersion"] != KUSTOMIZATION_API_VERSION:
        return False
    if kustomization["kind"] != "Kustomization":
        return False
    resources = kustomization["resources"]
    return (isinstance(resources, list) and bool(resources)
            and all(isinstance(name, str) and _PLAIN_FILE_NAME.fullmatch(name)
                    for name in resources)
            and len(set(resources)) == len(resources))


def _is_object(document: Any) -> bool:
    if not isinstance(document, dict):
        return False
    metadata = document.get("metadata")
    return (isinstance(document.get("apiVersion"), str) and isinstance(document.get("kind"), str)
            and not document["kind"].endswith("List") and isinstance(metadata, dict)
            and isinstance(metadata.get("name"), str) and bool(metadata["name"])
            and isinstance(metadata.get("namespace", ""), str)
            and _plain_values(document)
            and all(_strings(metadata.get(field)) for field in ("labels", "annotations")))


def _strings(mapping: Any) -> bool:
    return mapping is None or (isinstance(mapping, dict)
                               and all(isinstance(value, str) for value in mapping.values()))


def _plain_values(value: Any) -> bool:
    """Only values Kustomize writes back as they were read: a null, a timestamp or binary value,
    or a label or annotation that is not a string (`0755`, `null`), comes back as other text."""
    if isinstance(value, dict):
        return all(isinstance(key, str) and _plain_values(item) for key, item in value.items())
    if isinstance(value, list):
        return all(_plain_values(item) for item in value)
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, str | bool | int)


def _one_identity_each(documents: Any) -> bool:
    """One namespace for all, one API version per kind, one object per kind and name."""
    namespaces: set[str] = set()
    versions: dict[str, str] = {}
    names: set[tuple[str, str]] = set()
    for document in documents:
        kind = document["kind"]
        namespaces.add(document["metadata"].get("namespace", ""))
        if versions.setdefault(kind, document["apiVersion"]) != document["apiVersion"]:
            return False
        identity = (kind, document["metadata"]["name"])
        if identity in names:
            return False
        names.add(identity)
    return len(namespaces) <= 1


def _order(document: dict[str, Any]) -> tuple[Any, ...]:
    kind = document["kind"]
    group, _, version = document["apiVersion"].rpartition("/")
    if kind in _FIRST:
        place: tuple[Any, ...] = (0, _FIRST.index(kind))
    elif kind in _LAST:
        place = (2, _LAST.index(kind))
    else:
        place = (1, group, version, kind)
    return (*place, document["metadata"]["name"])
