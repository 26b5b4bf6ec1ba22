"""Turn rendered multi-document YAML into plain Kubernetes objects and look objects up.

Everything that judges the rendered output (validation, the local runner) works on the same plain
`dict` form the API server would receive as JSON, so YAML types that JSON lacks (timestamps,
binary) are turned into strings here once. `yaml_input.read_manifests` reads the text (with
libyaml, and overflowing floats as Kubernetes' Go tools read them).
"""

from __future__ import annotations

import base64
import datetime
from collections.abc import Iterable
from typing import Any

from tfcompile.compiler.yaml_input import YamlInputError, read_manifests

from .kustomize import RenderingError

KubernetesObject = dict[str, Any]


class ManifestError(RenderingError):
    """Rendered text that is not a list of Kubernetes objects."""


def parse_manifests(text: str, source: str = "rendered manifests") -> list[KubernetesObject]:
    """Every non-empty YAML document of `text`, in order, as a JSON-compatible dict.

    Raises `ManifestError` (naming `source`) for invalid YAML or a document that is not an object
    with `apiVersion`, `kind` and `metadata.name`.
    """
    try:
        documents = read_manifests(text)
    except YamlInputError as failure:
        raise ManifestError(f"{source}: not valid YAML: {failure}") from None
    objects: list[KubernetesObject] = []
    for position, document in enumerate(documents, start=1):
        if document is None:
            continue
        if not isinstance(document, dict):
            raise ManifestError(
                f"{source}: document {position} is a {type(document).__name__}, "
                "not a Kubernetes object"
            )
        plain = json_object(document)
        _check_identity(plain, source, position)
        objects.append(plain)
    return objects


def json_object(document: dict[Any, Any]) -> KubernetesObject:
    """A YAML mapping as the API server would receive it in JSON (`_json_compatible`)."""
    return {str(key): _json_compatible(value) for key, value in document.items()}


def object_reference(kubernetes_object: KubernetesObject) -> str:
    """`Kind/name`, the way `kubectl` names an object in messages."""
    return f"{kubernetes_object.get('kind')}/{name_of(kubernetes_object)}"


def name_of(kubernetes_object: KubernetesObject) -> str:
    metadata = kubernetes_object.get("metadata") or {}
    return str(metadata.get("name", ""))


def namespace_of(kubernetes_object: KubernetesObject) -> str | None:
    metadata = kubernetes_object.get("metadata") or {}
    namespace = metadata.get("namespace")
    return str(namespace) if namespace else None


def objects_of_kind(objects: Iterable[KubernetesObject], kind: str) -> list[KubernetesObject]:
    """The objects of one `kind`, in rendered order."""
    return [candidate for candidate in objects if candidate.get("kind") == kind]


def find_object(
    objects: Iterable[KubernetesObject],
    kind: str,
    name: str,
    namespace: str | None = None,
) -> KubernetesObject | None:
    """The object of `kind` named `name` in `namespace` (None: no namespace set), or None."""
    for candidate in objects:
        if (
            candidate.get("kind") == kind
            and name_of(candidate) == name
            and namespace_of(candidate) == namespace
        ):
            return candidate
    return None


def _check_identity(document: KubernetesObject, source: str, position: int) -> None:
    missing = [field for field in ("apiVersion", "kind") if not document.get(field)]
    metadata = document.get("metadata")
    if not isinstance(metadata, dict) or not metadata.get("name"):
        missing.append("metadata.name")
    if missing:
        raise ManifestError(
            f"{source}: document {position} has no {', '.join(missing)}; "
            "every rendered document must be a named Kubernetes object"
        )


def _json_compatible(value: Any) -> Any:
    """The value as JSON would carry it: mapping keys as strings, timestamps and bytes as text."""
    if isinstance(value, dict):
        return {str(key): _json_compatible(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_json_compatible(item) for item in value]
    if isinstance(value, datetime.datetime | datetime.date):
        return value.isoformat()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    return value
