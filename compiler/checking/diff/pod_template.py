"""Why a role's pods restart: the differences of its pod template, named as a reviewer thinks
of them.

Kubernetes replaces a StatefulSet's pods when its pod template changes, whatever changed in it.
The reasons, in the order printed: `image`, `command or args`, `script` (the script ConfigMap
the pods mount, named by a digest of the script), `launcher` (the launcher's ConfigMap, and how
the container starts it: its program's path and arguments before `--`), `env`
(variables and envFrom, `TF_CONFIG` aside), `TF_CONFIG`, `resources`, and `pod settings` for
everything else (labels, annotations, volumes, mounts, ports, security, scheduling, sidecars).
The revision annotation is not a reason of its own: it changes with what the pods run, and
`comparison` says what that was when nothing else in the role's template did.
"""

from __future__ import annotations

import copy
from typing import Any

from tfcompile.compiler.objects.labels import REVISION_ANNOTATION
from tfcompile.compiler.objects.launcher_interface import (
    LAUNCHER_DIRECTORY,
    LAUNCHER_VOLUME,
    SCRIPT_VOLUME,
)

REASONS = ("image", "command or args", "script", "launcher", "env", "TF_CONFIG", "resources",
           "pod settings")
TF_CONFIG = "TF_CONFIG"
_CONTAINER_LISTS = ("initContainers", "containers")
_MOUNTED_MAPS = {SCRIPT_VOLUME: "script", LAUNCHER_VOLUME: "launcher"}


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _by_name(value: Any) -> dict[str, Any]:
    """A list of named items (containers, volumes, variables) by name; unnamed ones by place."""
    if not isinstance(value, list):
        return {}
    return {str(item["name"]) if isinstance(item, dict) and "name" in item else f"#{index}": item
            for index, item in enumerate(value)}


def without_revision(template: Any) -> dict[str, Any]:
    """The pod template with its revision annotation removed."""
    copied = copy.deepcopy(_mapping(template))
    annotations = _mapping(_mapping(copied.get("metadata")).get("annotations"))
    annotations.pop(REVISION_ANNOTATION, None)
    return copied


def revision_of(template: Any) -> Any:
    return _mapping(_mapping(_mapping(template).get("metadata")).get("annotations")).get(
        REVISION_ANNOTATION)


def _starts_launcher(command: Any) -> bool:
    """Whether a container's `command` is the launcher's (`python <launcher directory>/…`; the
    training command is then its `args`)."""
    return (isinstance(command, list) and len(command) >= 2 and isinstance(command[1], str)
            and command[1].startswith(LAUNCHER_DIRECTORY + "/"))


def _command_reason(before: dict[str, Any], after: dict[str, Any]) -> str | None:
    """`command or args` when the command the container runs changed; `launcher` when only how
    it starts the launcher did (a new protocol's program path), the training's the same."""
    old_command, new_command = before.pop("command", None), after.pop("command", None)
    old_args, new_args = before.pop("args", None), after.pop("args", None)
    if (old_command, old_args) == (new_command, new_args):
        return None
    if old_args == new_args and _starts_launcher(old_command) and _starts_launcher(new_command):
        return "launcher"
    return "command or args"


def _container_reasons(before: dict[str, Any], after: dict[str, Any]) -> set[str]:
    reasons = set()
    before, after = dict(before), dict(after)
    if before.pop("image", None) != after.pop("image", None):
        reasons.add("image")
    command = _command_reason(before, after)
    if command is not None:
        reasons.add(command)
    if before.pop("resources", None) != after.pop("resources", None):
        reasons.add("resources")
    variables_before, variables_after = _by_name(before.pop("env", None)), _by_name(
        after.pop("env", None))
    if variables_before.pop(TF_CONFIG, None) != variables_after.pop(TF_CONFIG, None):
        reasons.add("TF_CONFIG")
    if (variables_before != variables_after
            or before.pop("envFrom", None) != after.pop("envFrom", None)):
        reasons.add("env")
    if before != after:
        reasons.add("pod settings")
    return reasons


def _volume_reasons(before: Any, after: Any) -> set[str]:
    reasons = set()
    volumes_before, volumes_after = _by_name(before), _by_name(after)
    for name in sorted(set(volumes_before) | set(volumes_after)):
        old, new = volumes_before.get(name), volumes_after.get(name)
        if old == new:
            continue
        both_maps = (isinstance(old, dict) and isinstance(new, dict)
                     and set(old) == set(new) == {"name", "configMap"})
        reasons.add(_MOUNTED_MAPS.get(name, "pod settings") if both_maps else "pod settings")
    return reasons


def restart_reasons(before: Any, after: Any) -> list[str]:
    """Why pods of the template `before` are replaced by pods of `after`, in `REASONS` order;
    empty when the templates differ at most in their revision annotation."""
    old, new = without_revision(before), without_revision(after)
    if old == new:
        return []
    reasons: set[str] = set()
    old_spec, new_spec = dict(_mapping(old.get("spec"))), dict(_mapping(new.get("spec")))
    for field in _CONTAINER_LISTS:
        containers_before = _by_name(old_spec.pop(field, None))
        containers_after = _by_name(new_spec.pop(field, None))
        for name in set(containers_before) | set(containers_after):
            old_container, new_container = (containers_before.get(name),
                                             containers_after.get(name))
            if isinstance(old_container, dict) and isinstance(new_container, dict):
                reasons |= _container_reasons(old_container, new_container)
            elif old_container != new_container:
                reasons.add("pod settings")  # a container added or removed: a sidecar
    reasons |= _volume_reasons(old_spec.pop("volumes", None), new_spec.pop("volumes", None))
    if old_spec != new_spec or old.get("metadata") != new.get("metadata"):
        reasons.add("pod settings")
    return [reason for reason in REASONS if reason in reasons]


def mounted_config_maps(template: Any) -> dict[str, str]:
    """The script and launcher ConfigMaps the pods mount: reason -> ConfigMap name."""
    mounted = {}
    for name, volume in _by_name(_mapping(_mapping(template).get("spec")).get("volumes")).items():
        config_map = _mapping(_mapping(volume).get("configMap")).get("name")
        if name in _MOUNTED_MAPS and isinstance(config_map, str):
            mounted[_MOUNTED_MAPS[name]] = config_map
    return mounted
