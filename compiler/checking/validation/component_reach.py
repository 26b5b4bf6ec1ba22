"""The renderings before each component, told from the final one when the components cannot meet.

`component_conflicts.py` compares each component's rendering with the one before it, and each
of those renderings is a Kustomize run of its own. That is needed only where components can
change the same object. A component that does nothing but patch objects of named kinds
(`patches:` with a `target.kind` and an inline patch, as the gpu and azure components do) changes
objects of those kinds alone, and none of their identities: Kustomize keeps the kind, name and
namespace under a strategic-merge patch unless the entry's `options` allow a change, and a JSON
patch is taken here only when no operation touches `/kind`, `/apiVersion`, or the name or
namespace under `/metadata`. When every component is of that shape and no two name a kind in
common, each object is changed by one component at most, so the rendering before component
`k` is, object by object, the final one for the kinds of the components ahead of `k` and the
compiled output for the rest; an object the final rendering lacks was deleted by the component
of its kind. Then the steps cost no Kustomize run: `validate` renders the job alone.

Anything else (another field in a component, a patch from a file, `options`, a kind given as a
pattern, two components naming one kind, a patch that is not one mapping or one list of
operations, a component that cannot be read) answers None, and the steps are rendered.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tfcompile.compiler.rendering.manifests import KubernetesObject, name_of, namespace_of
from tfcompile.compiler.rendering.plain_kustomization import regular_file_text
from tfcompile.compiler.rendering.remote_resources import (
    KUSTOMIZATION_FILE_NAMES,
    read_kustomization,
)
from tfcompile.compiler.yaml_input import YamlInputError, read_manifests

COMPONENT_API_VERSION = "kustomize.config.k8s.io/v1alpha1"
_COMPONENT_FIELDS = frozenset({"apiVersion", "kind", "patches"})
_PATCH_FIELDS = frozenset({"target", "patch"})
_TARGET_FIELDS = frozenset({"group", "version", "kind", "name", "namespace", "labelSelector",
                            "annotationSelector"})
# A kind Kustomize matches as itself: its selector fields are anchored regular expressions.
_LITERAL_KIND = re.compile(r"[A-Za-z][A-Za-z0-9]*")
_LARGEST_COMPONENT_CHARACTERS = 64 * 1024
"""A component file larger than this is left to Kustomize's steps (tfcompile's are ~2 KiB;
the texts read are kept, `_kinds_in`)."""

Identity = tuple[str, str, str, str]
"""An object as Kustomize tells it apart: API version, kind, namespace, name."""


def kinds_each_changes(directory: Path, components: Sequence[str]) -> list[frozenset[str]] | None:
    """The kinds each of `components` (entries of the kustomization in `directory`) may change,
    when every one only patches objects of named kinds without changing who they are and no
    two share a kind; None otherwise."""
    kinds: list[frozenset[str]] = []
    seen: set[str] = set()
    for entry in components:
        changed = _kinds_patched(directory, entry)
        if changed is None or changed & seen:
            return None
        seen |= changed
        kinds.append(changed)
    return kinds


def steps_from_final(before_first: Sequence[KubernetesObject],
                     final: Sequence[KubernetesObject],
                     kinds: Sequence[frozenset[str]]) -> list[list[KubernetesObject]]:
    """The rendering before each component, for components that change the disjoint `kinds`
    (`kinds_each_changes`): objects of the kinds of the components ahead as they are in `final`
    (left out where `final` lacks them), the others as in `before_first`."""
    finished = {_identity(item): item for item in final}
    steps: list[list[KubernetesObject]] = []
    ahead: set[str] = set()
    for changed in kinds:
        step: list[KubernetesObject] = []
        for item in before_first:
            if str(item.get("kind")) not in ahead:
                step.append(item)
            elif (last := finished.get(_identity(item))) is not None:
                step.append(last)
        steps.append(step)
        ahead |= changed
    return steps


def _identity(item: KubernetesObject) -> Identity:
    return (str(item.get("apiVersion")), str(item.get("kind")), namespace_of(item) or "",
            name_of(item))


def _kinds_patched(directory: Path, entry: str) -> frozenset[str] | None:
    text = _component_text(directory / entry)
    return None if text is None else _kinds_in(text)


@functools.lru_cache(maxsize=64)
def _kinds_in(text: str) -> frozenset[str] | None:
    """The kinds a component's kustomization text patches (`_kinds_patched`); each text read
    once, however many jobs name the component."""
    try:
        document = read_kustomization(text)
    except (YamlInputError, ValueError):
        return None
    if (document is None or not set(document) <= _COMPONENT_FIELDS
            or document.get("apiVersion") != COMPONENT_API_VERSION
            or document.get("kind") != "Component"):
        return None
    patches = document.get("patches", [])
    if not isinstance(patches, list):
        return None
    kinds: set[str] = set()
    for patch in patches:
        kind = _patched_kind(patch)
        if kind is None:
            return None
        kinds.add(kind)
    return frozenset(kinds)


def _patched_kind(patch: Any) -> str | None:
    """The kind an inline patch entry changes objects of, when it keeps who they are."""
    if not isinstance(patch, dict) or set(patch) != _PATCH_FIELDS:
        return None
    target, text = patch["target"], patch["patch"]
    if not isinstance(target, dict) or not set(target) <= _TARGET_FIELDS:
        return None
    kind = target.get("kind")
    if not isinstance(kind, str) or not _LITERAL_KIND.fullmatch(kind) or not isinstance(text, str):
        return None
    try:
        documents = [document for document in read_manifests(text) if document is not None]
    except (YamlInputError, ValueError):
        return None
    if len(documents) != 1:
        return None
    (body,) = documents
    if isinstance(body, dict):
        return kind  # a strategic merge: Kustomize keeps kind, name and namespace
    if isinstance(body, list) and all(_keeps_identity(operation) for operation in body):
        return kind
    return None


def _keeps_identity(operation: Any) -> bool:
    """Whether a JSON patch operation leaves an object's kind, API version, name and
    namespace alone."""
    if not isinstance(operation, dict) or not isinstance(operation.get("path"), str):
        return False
    pointers = [operation["path"]]
    if "from" in operation:
        if not isinstance(operation["from"], str):
            return False
        pointers.append(operation["from"])
    return not any(_names_identity(pointer) for pointer in pointers)


def _names_identity(pointer: str) -> bool:
    if not pointer.startswith("/"):
        return True  # the whole object, or not a pointer Kustomize takes
    segments = pointer[1:].split("/")
    if segments[0] in {"kind", "apiVersion"}:
        return True
    return segments[0] == "metadata" and (
        len(segments) == 1 or segments[1] in {"name", "namespace", "generateName"})


def _component_text(directory: Path) -> str | None:
    """The kustomization text of a component directory, when it is exactly one plain file."""
    present = [name for name in KUSTOMIZATION_FILE_NAMES if os.path.lexists(directory / name)]
    if len(present) != 1:
        return None
    try:
        text = regular_file_text(directory / present[0])
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return text if len(text) <= _LARGEST_COMPONENT_CHARACTERS else None
