"""Components that fight: list entries a Kustomize Component dropped while rendering.

A strategic-merge patch replaces lists Kubernetes declares atomic (tolerations) and a JSON patch
can replace any list, so a component that sets `tolerations:` silently removes the GPU
toleration another component (or the job's `podTemplate`) added, and the pods never schedule.
The rendered result alone looks valid; only comparing it with what came before each component
shows the loss. This renders the job without its components, then (only when something was
lost) with each prefix of them, and names the component that dropped each entry.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from ..rendering.kustomize import RenderingError, render
from ..rendering.manifests import KubernetesObject, object_reference, parse_manifests
from .report import Problem

KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
_TEMPLATE_PATHS = {
    "StatefulSet": ("spec", "template"),
    "Deployment": ("spec", "template"),
    "DaemonSet": ("spec", "template"),
    "ReplicaSet": ("spec", "template"),
    "Job": ("spec", "template"),
}

Entry = tuple[str, str]
"""(what it is, how the user recognises it): ("toleration", "key nvidia.com/gpu, ...")."""


def _pod_spec(kubernetes_object: Mapping[str, Any]) -> Mapping[str, Any] | None:
    path = _TEMPLATE_PATHS.get(str(kubernetes_object.get("kind")))
    if path is None:
        return None
    node: Any = kubernetes_object
    for part in (*path, "spec"):
        node = node.get(part) if isinstance(node, Mapping) else None
    return node if isinstance(node, Mapping) else None


def _toleration(toleration: Mapping[str, Any]) -> str:
    parts = [f"{field} {toleration[field]}" for field in ("key", "operator", "effect")
             if field in toleration]
    return ", ".join(parts) or "tolerate everything"


def entries_of(kubernetes_object: Mapping[str, Any]) -> list[Entry]:
    """The list entries of a workload's pod template that a component could drop; values of
    environment variables are never part of them (they may be secrets)."""
    spec = _pod_spec(kubernetes_object)
    if spec is None:
        return []
    found: list[Entry] = []

    def items(node: Any, field: str) -> list[Mapping[str, Any]]:
        value = node.get(field) if isinstance(node, Mapping) else None
        return [item for item in value if isinstance(item, Mapping)] \
            if isinstance(value, list) else []

    for toleration in items(spec, "tolerations"):
        found.append(("toleration", _toleration(toleration)))
    for secret in items(spec, "imagePullSecrets"):
        found.append(("image pull secret", str(secret.get("name"))))
    for volume in items(spec, "volumes"):
        found.append(("volume", str(volume.get("name"))))
    for kind, label in (("initContainers", "init container"), ("containers", "container")):
        for container in items(spec, kind):
            name = str(container.get("name"))
            found.append((label, name))
            for variable in items(container, "env"):
                found.append(("env var", f"{variable.get('name')} of container {name}"))
            for mount in items(container, "volumeMounts"):
                found.append(("mount", f"{mount.get('mountPath')} of container {name}"))
            for port in items(container, "ports"):
                found.append(("port", f"{port.get('containerPort')} of container {name}"))
    return found


def _by_workload(objects: Sequence[KubernetesObject]) -> dict[str, list[Entry]]:
    return {object_reference(item): entries_of(item) for item in objects
            if _pod_spec(item) is not None}


def _lost(before: dict[str, list[Entry]], after: dict[str, list[Entry]]) -> Iterator[
        tuple[str, Entry]]:
    for reference, entries in before.items():
        if reference not in after:
            continue  # renamed or removed as a whole: not a dropped list entry
        remaining = list(after[reference])
        for entry in entries:
            if entry in remaining:
                remaining.remove(entry)
            else:
                yield reference, entry


def _kustomization(directory: Path) -> tuple[Path, dict[str, Any]] | None:
    for name in KUSTOMIZATION_FILES:
        path = directory / name
        if path.is_file() and not path.is_symlink():
            try:
                # Written by people: the pure parser reads what Kustomize reads (libyaml refuses
                # `image: a:1` inside a flow mapping).
                document = YAML(typ="safe", pure=True).load(path.read_text(encoding="utf-8"))
            except (OSError, YAMLError, UnicodeDecodeError):
                return None
            return (path, document) if isinstance(document, dict) else None
    return None


def _relocated(entry: str, directory: Path, copy: Path) -> str:
    """A resource entry as the copy must name it: entries outside the directory are made
    relative to the copy; files inside it and anything else (URLs) are kept."""
    if "://" in entry or os.path.isabs(entry) or not entry.startswith(".."):
        return entry
    return os.path.relpath(os.path.normpath(directory / entry), copy)


def _render_with(directory: Path, kustomization: tuple[Path, dict[str, Any]],
                 components: list[str], workspace: Path) -> list[KubernetesObject]:
    """Render a copy of `directory` whose kustomization names only `components`."""
    copy = workspace / f"step-{len(components)}"
    shutil.copytree(directory, copy, symlinks=True)
    path, document = kustomization
    changed = dict(document)
    changed["components"] = [
        component if os.path.isabs(component) or "://" in component
        else os.path.relpath(os.path.normpath(directory / component), copy)
        for component in components
    ]
    if not components:
        changed.pop("components")
    for field in ("resources", "bases"):
        if field in document:
            changed[field] = [_relocated(str(entry), directory, copy)
                              for entry in document.get(field) or []]
    (copy / path.name).write_text(json.dumps(changed), encoding="utf-8")
    return parse_manifests(render(copy), source=str(directory))


def dropped_entry_problems(directory: Path, rendered: Sequence[KubernetesObject]) -> list[Problem]:
    """Entries of the rendering without components (the compiled output) or after an earlier
    component that a later component dropped, each naming the component."""
    kustomization = _kustomization(directory)
    if kustomization is None:
        return []
    components = [str(entry) for entry in kustomization[1].get("components") or []]
    if not components:
        return []
    final = _by_workload(rendered)
    with tempfile.TemporaryDirectory(prefix="tfcompile-components-") as temporary:
        workspace = Path(temporary)
        try:
            steps = [_by_workload(_render_with(directory, kustomization, [], workspace))]
            if not list(_lost(steps[0], final)):
                return []
            for count in range(1, len(components)):
                steps.append(_by_workload(
                    _render_with(directory, kustomization, components[:count], workspace)))
        except (RenderingError, OSError, ValueError):
            return []
    steps.append(final)
    problems = []
    for index, component in enumerate(components):
        before = "the compiled output" if index == 0 else f"component {components[index - 1]}"
        for reference, (what, which) in _lost(steps[index], steps[index + 1]):
            problems.append(Problem(
                reference,
                f"component {component} dropped the {what} {which} that {before} had: a "
                "strategic-merge patch replaces lists such as tolerations, and a JSON patch "
                "that replaces a list drops its entries; append instead (JSON patch `op: add` "
                "with a path ending in `/-`) or merge by name",
            ))
    return problems
