"""Components that fight: what a Kustomize Component removed or changed of what came before it.

Components may add to what the job compiled to and to what earlier components added; a component
that removes or changes any of it wins silently, and the rendered result alone looks valid. A
strategic-merge patch replaces lists Kubernetes declares atomic (tolerations), a JSON patch can
replace any list, and of two components setting the same node selector key or namespace the
last one wins: the GPU toleration is gone and the pods never schedule, or half the job lands in
another namespace. So each component's rendering is compared with the one before it
(`component_steps.py`): a removed or changed setting that the final rendering does not restore is
reported, naming the component and who set it (the job's compiled output, or the component that
added it). Checked: per object, its namespace, labels and annotations, a PVC's storage class;
per pod template, its labels and annotations, node selector keys, scalar fields (restartPolicy,
serviceAccountName, ...), affinity terms, topology spread constraints, tolerations, image pull
secrets, volumes, containers and init containers, and per container its command and args, env
vars, envFrom sources, mounts and ports. Images are not: a component that points them at a
mirror is common. Values of env vars and annotations are never printed (they may be secrets).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tfcompile.compiler.rendering.manifests import KubernetesObject, object_reference

from .component_steps import ComponentSteps
from .report import ObjectProblem, quoted
from .workload_rules import (
    TENSORFLOW_CONTAINER,
    arguments_problem,
    is_role,
    launcher_problem,
    pod_spec,
    restart_policy,
    restart_policy_problem,
)

Fact = tuple[str, ...]
"""What a setting is: ("node selector", key), ("env var", container, name), ..."""

_ABSENT = object()

# Settings removed as list entries (and the advice for them), as map keys, or as whole values.
_LIST_ENTRIES = {"toleration", "image pull secret", "volume", "container", "init container",
                 "env var", "env source", "mount", "port", "topology spread constraint",
                 *(f"{kind} {what} term" for kind in ("required", "preferred")
                   for what in ("node affinity", "pod affinity", "pod anti-affinity"))}
# Kustomize's own record of where an object came from and what transformed it
# (`buildMetadata`), which differs from one step to the next by design.
_KUSTOMIZE_ANNOTATIONS = ("config.kubernetes.io/", "alpha.config.kubernetes.io/",
                          "internal.config.kubernetes.io/")
# Settings whose values are shown in messages; the others' values may be secrets.
_SHOWN = {"namespace", "label", "pod label", "node selector", "pod field", "storage class"}
_LIST_ADVICE = ("a strategic-merge patch replaces lists such as tolerations, and a JSON patch "
                "that replaces a list drops its entries; append instead (JSON patch `op: add` "
                "with a path ending in `/-`) or merge by name")
_CHANGE_ADVICE = ("only the last value is kept; make them agree, or leave the setting to one "
                  "of them")


def _shown(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _words(digest: Any) -> list[str]:
    """A command's words, printable, from its `_digest`."""
    try:
        value = json.loads(digest) if isinstance(digest, str) else digest
    except ValueError:
        value = digest
    return [quoted(word) for word in value] if isinstance(value, list) else [quoted(value)]


def _digest(value: Any) -> Any:
    """A comparable form of any JSON value."""
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True)
    return value


def _toleration(toleration: Mapping[str, Any]) -> str:
    parts = [f"{field} {quoted(toleration[field])}" for field in ("key", "operator", "effect")
             if field in toleration]
    if "value" in toleration:
        parts.insert(1, f"value {quoted(toleration['value'])}")
    return ", ".join(parts) or "tolerate everything"


def _items(node: Any, field: str) -> list[Mapping[str, Any]]:
    value = node.get(field) if isinstance(node, Mapping) else None
    return [item for item in value if isinstance(item, Mapping)] if isinstance(value, list) else []


def _map(node: Any, field: str) -> Mapping[str, Any]:
    value = node.get(field) if isinstance(node, Mapping) else None
    return value if isinstance(value, Mapping) else {}


def _source(entry: Mapping[str, Any]) -> str:
    for field, what in (("configMapRef", "ConfigMap"), ("secretRef", "Secret")):
        reference = entry.get(field)
        if isinstance(reference, Mapping):
            prefix = f" with prefix {quoted(entry['prefix'])}" if "prefix" in entry else ""
            return f"{what} {quoted(reference.get('name'))}{prefix}"
    return quoted(_digest(dict(entry)))


def _affinity_terms(affinity: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Each term of a pod's affinity, named by its kind (a strategic merge replaces these
    lists whole)."""
    node = _map(affinity, "nodeAffinity")
    required = _map(node, "requiredDuringSchedulingIgnoredDuringExecution")
    for term in _items(required, "nodeSelectorTerms"):
        yield "required node affinity term", term
    for term in _items(node, "preferredDuringSchedulingIgnoredDuringExecution"):
        yield "preferred node affinity term", term
    for field, what in (("podAffinity", "pod affinity"), ("podAntiAffinity", "pod anti-affinity")):
        for term in _items(_map(affinity, field), "requiredDuringSchedulingIgnoredDuringExecution"):
            yield f"required {what} term", term
        for term in _items(_map(affinity, field),
                           "preferredDuringSchedulingIgnoredDuringExecution"):
            yield f"preferred {what} term", term


def _by_key(mapping: Mapping[Any, Any]) -> list[tuple[Any, Any]]:
    """A map's entries by key: Kustomize writes some maps in another order than the files it
    read, and a step it rendered must give the same findings, in the same order, as a step
    told from the final rendering (`component_reach`)."""
    return sorted(mapping.items(), key=lambda entry: str(entry[0]))


def facts_of(kubernetes_object: Mapping[str, Any]) -> dict[Fact, Any]:
    """Every setting of an object a component could remove or change, with its value."""
    facts: dict[Fact, Any] = {}
    metadata = _map(kubernetes_object, "metadata")
    if metadata.get("namespace"):
        facts[("namespace",)] = metadata["namespace"]
    for key, value in _by_key(_map(metadata, "labels")):
        facts[("label", key)] = _digest(value)
    for key, value in _by_key(_map(metadata, "annotations")):
        if not key.startswith(_KUSTOMIZE_ANNOTATIONS):
            facts[("annotation", key)] = _digest(value)
    if kubernetes_object.get("kind") == "PersistentVolumeClaim":
        storage_class = _map(kubernetes_object, "spec").get("storageClassName")
        if storage_class is not None:
            facts[("storage class",)] = storage_class
    spec = pod_spec(kubernetes_object)
    if spec is None:
        return facts
    template_metadata = _map(_map(kubernetes_object, "spec").get("template"), "metadata")
    for key, value in _by_key(_map(template_metadata, "labels")):
        facts[("pod label", key)] = _digest(value)
    for key, value in _by_key(_map(template_metadata, "annotations")):
        facts[("pod annotation", key)] = _digest(value)
    for key, value in _by_key(spec):
        if not isinstance(value, dict | list):
            facts[("pod field", key)] = value
    policy = restart_policy(kubernetes_object)
    if policy is not None:
        facts[("pod field", "restartPolicy")] = policy
    for key, value in _by_key(_map(spec, "nodeSelector")):
        facts[("node selector", key)] = _digest(value)
    for toleration in _items(spec, "tolerations"):
        facts[("toleration", _toleration(toleration))] = None
    for what, term in _affinity_terms(_map(spec, "affinity")):
        facts[(what, quoted(_digest(dict(term))))] = None
    for constraint in _items(spec, "topologySpreadConstraints"):
        facts[("topology spread constraint", quoted(_digest(dict(constraint))))] = None
    for secret in _items(spec, "imagePullSecrets"):
        facts[("image pull secret", quoted(secret.get("name")))] = None
    for volume in _items(spec, "volumes"):
        facts[("volume", quoted(volume.get("name")))] = _digest(dict(volume))
    for field, what in (("initContainers", "init container"), ("containers", "container")):
        for container in _items(spec, field):
            name = quoted(container.get("name"))
            facts[(what, name)] = None
            for part in ("command", "args"):
                if part in container:
                    facts[(part, name)] = _digest(container[part])
            for variable in _items(container, "env"):
                facts[("env var", name, quoted(variable.get("name")))] = _digest(
                    {key: value for key, value in variable.items() if key != "name"})
            for source in _items(container, "envFrom"):
                facts[("env source", name, _source(source))] = None
            for mount in _items(container, "volumeMounts"):
                facts[("mount", name, quoted(mount.get("mountPath")))] = _digest(dict(mount))
            for port in _items(container, "ports"):
                facts[("port", name, quoted(port.get("containerPort")),
                       quoted(port.get("protocol") or "TCP"))] = _digest(dict(port))
    return facts


def _describe(fact: Fact) -> str:
    """The setting as a user recognises it: "the env var EPOCHS of container tensorflow"."""
    kind, *parts = fact
    if kind == "namespace" or kind == "storage class":
        return f"the {kind}"
    if kind in {"env var", "env source", "mount"}:
        return f"the {kind} {parts[1]} of container {parts[0]}"
    if kind == "port":
        return f"the port {parts[1]}/{parts[2]} of container {parts[0]}"
    if kind in {"command", "args"}:
        return f"the {kind} of container {parts[0]}"
    return f"the {kind} {quoted(parts[0])}"


@dataclass(frozen=True)
class _Change:
    reference: str
    kind: str
    role: bool  # a StatefulSet of a TensorFlow role
    fact: Fact
    component: str
    origin: str  # "the compiled output", or "component X"
    origin_is_component: bool
    before: Any
    after: Any  # _ABSENT when removed


_Key = tuple[str, int]
"""An object by its reference (`Kind/name`) and its place among objects of that reference: a
component may move an object to another namespace, which is no new object."""


def _keyed(rendering: Sequence[KubernetesObject]) -> dict[_Key, KubernetesObject]:
    keyed: dict[_Key, KubernetesObject] = {}
    for item in rendering:
        reference = object_reference(item)
        number = 0
        while (reference, number) in keyed:  # the same name in two namespaces
            number += 1
        keyed[(reference, number)] = item
    return keyed


def _changes(steps: ComponentSteps, final_rendering: Sequence[KubernetesObject]) -> Iterator[
        _Change]:
    keyed = [_keyed(rendering) for rendering in (*steps.before, final_rendering)]
    # Steps told from the final rendering share its objects: each object's facts once.
    known: dict[int, dict[Fact, Any]] = {}

    def facts_once(item: KubernetesObject) -> dict[Fact, Any]:
        found = known.get(id(item))
        if found is None:
            found = known[id(item)] = facts_of(item)
        return found

    facts = [{key: facts_once(item) for key, item in objects.items()} for objects in keyed]
    final = facts[-1]
    for index, component in enumerate(steps.components):
        before, after = facts[index], facts[index + 1]
        for key, settings in before.items():
            if key not in after or key not in final:
                continue  # renamed or removed as a whole: not a setting of it
            for fact, value in settings.items():
                new = after[key].get(fact, _ABSENT)
                if new == value or final[key].get(fact, _ABSENT) == value:
                    continue
                first = index
                while first > 0 and facts[first - 1].get(key, {}).get(fact, _ABSENT) == value:
                    first -= 1
                origin = (steps.base if first == 0
                          else f"component {quoted(steps.components[first - 1])}")
                item = keyed[-1][key]
                yield _Change(key[0], str(item.get("kind")), is_role(item), fact,
                              quoted(component), origin, first > 0, value, new)


def _message(change: _Change) -> str:
    kind = change.fact[0]
    what = _describe(change.fact)
    if change.after is _ABSENT:
        verb = "added" if change.origin_is_component else "had"
        advice = (_LIST_ADVICE if kind in _LIST_ENTRIES else
                  "a `$patch: replace` or a JSON patch that replaces the whole map drops its "
                  "keys; set keys one by one")
        return f"component {change.component} dropped {what} that {change.origin} {verb}: {advice}"
    if kind in _SHOWN:
        return (f"component {change.component} changed {what} from {_shown(change.before)}, "
                f"which {change.origin} set, to {_shown(change.after)}: {_CHANGE_ADVICE}")
    return (f"component {change.component} changed {what}, which {change.origin} set: "
            f"{_CHANGE_ADVICE}")


def component_problems(steps: ComponentSteps, final: Sequence[KubernetesObject]) -> tuple[
        list[ObjectProblem], set[ObjectProblem]]:
    """What each component removed or changed on its way to the `final` rendering, naming it and
    who set what it undid; and the problems of `workload_rules.py` these replace (the same
    finding without the component)."""
    problems: list[ObjectProblem] = []
    replaced: set[ObjectProblem] = set()
    namespaces: dict[tuple[str, str, Any, Any], list[str]] = defaultdict(list)
    for change in _changes(steps, final):
        kind = change.fact[0]
        if change.fact == ("pod field", "restartPolicy") and change.after not in (
                _ABSENT, "Always"):
            problems.append(restart_policy_problem(change.reference, change.kind,
                                                   str(change.after), change.component))
            replaced.add(restart_policy_problem(change.reference, change.kind,
                                                str(change.after)))
        elif kind in {"command", "args"} and change.fact[1] == TENSORFLOW_CONTAINER \
                and change.role:
            if kind == "command":
                problems.append(launcher_problem(change.reference, change.component,
                                                 _words(change.before)))
            else:
                problems.append(arguments_problem(change.reference, change.component))
        elif kind == "namespace":
            namespaces[(change.component, change.origin, change.before, change.after)].append(
                change.reference)
        else:
            problems.append(ObjectProblem(change.reference, _message(change)))
    for (component, origin, before, after), references in namespaces.items():
        others = len(references) - 1
        reference = references[0] + (
            f" and {others} other object{'s' if others != 1 else ''}" if others else "")
        moved = (f"dropped the namespace {_shown(before)}" if after is _ABSENT else
                 f"moved {'them' if others else 'it'} to namespace {_shown(after)} from "
                 f"namespace {_shown(before)}")
        problems.append(ObjectProblem(
            reference,
            f"component {component} {moved}, which {origin} set: {_CHANGE_ADVICE} (a job's "
            "objects must share one namespace: its pods find each other, their Services and "
            "their ConfigMaps there)",
        ))
    return problems, replaced
