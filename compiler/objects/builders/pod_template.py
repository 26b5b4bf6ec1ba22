"""Merge a `podTemplate` fragment into the pod template tfcompile generated.

The merge is Kubernetes' strategic merge (`kubectl patch --type strategic`), driven by the merge
keys of Kubernetes' own schema (`x-kubernetes-patch-merge-key`): containers, init containers and
volumes by name, mounts by path, env by name, ports by container port, … . One difference: a
list Kubernetes would replace wholesale (tolerations, node selector terms, …) is appended to,
without duplicates, so nothing tfcompile, the job or a role added is lost. `command` and `args`
are the one exception, since two command lines cannot be joined, and an env variable or a volume
of a name already there is replaced whole (its source is one of several fields). Maps merge key by
key; a scalar in the fragment replaces the generated one.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from tfcompile.spec.pod_template import ROOT_DEFINITION, definition, resolve

REPLACED_LISTS = ("command", "args")
"""Lists a fragment replaces: a command line is one value."""

REPLACED_ENTRIES = ("io.k8s.api.core.v1.EnvVar", "io.k8s.api.core.v1.Volume")
"""List entries a fragment replaces whole when the merge key matches: each holds one of several
sources (`value` or `valueFrom`, `emptyDir` or `persistentVolumeClaim`, …), and merging two
sources into one entry would give an object Kubernetes refuses."""


def merge_pod_template(base: Mapping[str, Any], fragment: Mapping[str, Any]) -> dict[str, Any]:
    """`base` (a pod template) with `fragment` merged into it; neither is changed."""
    merged: dict[str, Any] = _merge_map(base, fragment, definition(ROOT_DEFINITION))
    return merged


def _value_schema(schema: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """The schema of `key` in an object of `schema`: a declared property, or the schema of a
    free-form map's values."""
    resolved = resolve(schema)
    properties = resolved.get("properties", {})
    if key in properties:
        found: Mapping[str, Any] = properties[key]
        return found
    extra = resolved.get("additionalProperties")
    return extra if isinstance(extra, Mapping) else {}


def _free_form(schema: Mapping[str, Any]) -> bool:
    resolved = resolve(schema)
    return "properties" not in resolved and isinstance(resolved.get("additionalProperties"),
                                                        Mapping)


def _copy(value: Any, schema: Mapping[str, Any]) -> Any:
    """A deep copy of a fragment's value, the keys of its free-form maps (labels, nodeSelector,
    limits) in name order, as every map from the user is, so reordering them changes nothing."""
    if isinstance(value, Mapping):
        entries = sorted(value.items()) if _free_form(schema) else list(value.items())
        return {key: _copy(item, _value_schema(schema, key)) for key, item in entries}
    if isinstance(value, list):
        items = resolve(schema).get("items", {})
        return [_copy(item, items) for item in value]
    return value


def _merge(base: Any, patch: Any, schema: Mapping[str, Any], key: str) -> Any:
    if isinstance(base, Mapping) and isinstance(patch, Mapping):
        return _merge_map(base, patch, schema)
    if isinstance(base, list) and isinstance(patch, list) and key not in REPLACED_LISTS:
        return _merge_list(base, patch, schema)
    return _copy(patch, schema)


def _merge_map(base: Mapping[str, Any], patch: Mapping[str, Any],
               schema: Mapping[str, Any]) -> dict[str, Any]:
    merged = {key: copy.deepcopy(value) for key, value in base.items()}
    entries = sorted(patch.items()) if _free_form(schema) else list(patch.items())
    for key, value in entries:
        if key in merged and value is not None:
            merged[key] = _merge(merged[key], value, _value_schema(schema, key), key)
        elif value is not None:
            merged[key] = _copy(value, _value_schema(schema, key))
    return merged


def _merge_list(base: list[Any], patch: list[Any], schema: Mapping[str, Any]) -> list[Any]:
    resolved = resolve(schema)
    merge_key = resolved.get("x-kubernetes-patch-merge-key")
    items = resolved.get("items", {})
    merged = [copy.deepcopy(item) for item in base]
    # Where each merge key's value is, first entry first: a lookup per patched entry, so that a
    # list of thousands of volumes or ports merges in linear time.
    positions: dict[Any, int] = {}
    if merge_key is not None:
        for index, existing in enumerate(merged):
            if isinstance(existing, Mapping) and _hashable(existing.get(merge_key)):
                positions.setdefault(existing.get(merge_key), index)
    for item in patch:
        if merge_key is not None and isinstance(item, Mapping) and merge_key in item \
                and _hashable(item[merge_key]):
            position = positions.get(item[merge_key])
            if position is not None:
                replaced = items.get("$ref", "").removeprefix("#/$defs/") in REPLACED_ENTRIES
                merged[position] = (_copy(item, items) if replaced
                                    else _merge_map(merged[position], item, items))
                continue
            # An entry equal to this one would have its key: none is there, so it is new.
            positions[item[merge_key]] = len(merged)
            merged.append(_copy(item, items))
            continue
        if item not in merged:
            merged.append(_copy(item, items))
    return merged


def _hashable(value: Any) -> bool:
    return isinstance(value, str | int | float | bool) or value is None


def merge_maps(base: Mapping[str, Any], fragment: Mapping[str, Any]) -> dict[str, Any]:
    """`fragment` merged over `base` where no list has a merge key (a `securityContext`, the
    labels and annotations of a gang): maps key by key, lists appended. It needs no schema, so
    a job without `podTemplate` never loads one."""
    merged: dict[str, Any] = _merge_map(base, fragment, {})
    return merged
