"""Selectors written against a Kubeflow TFJob's pod labels, which tfcompile's pods never carry.

A TFJob's pods carry the training operator's labels (`training.kubeflow.org/replica-type:
worker`, `…/replica-index`, `…/job-name`, and before them `replica-type`, `replica-index`,
`job-name`, `group-name`), and manifests moved from a TFJob keep selectors written against them:
a pod anti-affinity that spreads the workers, a topology spread constraint, sometimes a node
selector. tfcompile's pods carry other labels (`compiler/objects/labels.py`: `tfcompile.dev/job`,
`tfcompile.dev/role`, the StatefulSet's `apps.kubernetes.io/pod-index`), so such a selector
silently selects none of the job's pods: the spread or the grouping does nothing, a required pod
affinity leaves the pods Pending, and as node labels they are on no node.

Two kinds, by whether it can ever be meant:

- `training.kubeflow.org/…` keys only the training operator sets: a selector on them in a job
  tfcompile runs can never select its pods, and no node carries them. An error, naming the
  tfcompile label to use instead.
- the older, unprefixed keys (`job-name`, `replica-type`, `replica-index`, `group-name`) are
  also set by others (a Kubernetes Job's pods carry `job-name`), so a selector on them may mean
  other pods: a warning (`tfcompile validate` gives it, on the rendered pods).

A key the job's own pods do carry (a label a pod template adds) is not reported: the selector
then selects them. The walk reads plain pod specs, so `validate` judges rendered objects with it
too, where a component may have added the selector.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from .pod_template import mapping, mappings
from .problems import FieldPath

ROLE_LABEL = "tfcompile.dev/role"
JOB_LABEL = "tfcompile.dev/job"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
"""The labels tfcompile's pods carry, as `compiler/objects/labels.py` sets them (a test holds the
two to the same names; the spec cannot import the compiler)."""

_OPERATOR_PREFIX = "training.kubeflow.org/"

_INSTEAD = {
    "replica-type": f"{ROLE_LABEL} (chief, worker, ps or evaluator; TFJob's master is chief)",
    "replica-index": f"{POD_INDEX_LABEL} (a pod's index in its role, with {ROLE_LABEL})",
    "job-name": f"{JOB_LABEL} (the job's name)",
    "job-role": f"{ROLE_LABEL}: chief (the pod TFJob called master or chief)",
    "operator-name": f"{MANAGED_BY_LABEL}: tfcompile",
    "group-name": f"{MANAGED_BY_LABEL}: tfcompile (every pod tfcompile runs), or {JOB_LABEL}",
}
"""TFJob's pod label (without the operator's prefix) -> the tfcompile label to use instead."""

OPERATOR_LABELS = tuple(_OPERATOR_PREFIX + name for name in
                        ("replica-type", "replica-index", "job-name", "job-role", "operator-name"))
OLDER_LABELS = ("replica-type", "replica-index", "job-name", "group-name")


@dataclass(frozen=True)
class TfjobSelector:
    """A selector key that is one of TFJob's pod labels: where it is (relative to the pod
    spec), whether a node or a pod is selected, and whether it can never be meant (`certain`)."""

    path: FieldPath
    label: str
    selects_nodes: bool
    certain: bool
    on_key: bool
    """Whether `path` ends at a mapping key (`matchLabels`, `nodeSelector`) or a value."""

    def message(self) -> str:
        instead = _INSTEAD[self.label.removeprefix(_OPERATOR_PREFIX)]
        who = ("only Kubeflow's training operator puts on TFJob pods" if self.certain else
               "Kubeflow's training operator put on TFJob pods (a Kubernetes Job's pods carry "
               "job-name too)")
        if self.selects_nodes:
            return (f"selects nodes by {self.label}, a pod label {who}; no node carries it, so "
                    "a required selector leaves the pods Pending and a preferred one does "
                    "nothing: select nodes by their own labels, and to keep a job's pods apart "
                    f"or together use pod (anti-)affinity on {instead}")
        return (f"selects pods by {self.label}, a label {who}; tfcompile's pods do not carry "
                f"it, so this selects none of the job's pods: use {instead}")


def _label_selector(selector: Any, path: FieldPath) -> Iterator[tuple[FieldPath, str, bool]]:
    """(path, key, on a key) of each key a label selector (or node selector term) reads."""
    for key in mapping(mapping(selector).get("matchLabels")):
        yield (*path, "matchLabels", key), str(key), True
    for index, expression in mappings(mapping(selector).get("matchExpressions")):
        if isinstance(expression.get("key"), str):
            yield (*path, "matchExpressions", index, "key"), expression["key"], False


def _pod_affinity_term(term: Mapping[str, Any],
                       path: FieldPath) -> Iterator[tuple[FieldPath, str, bool]]:
    yield from _label_selector(term.get("labelSelector"), (*path, "labelSelector"))
    for field in ("matchLabelKeys", "mismatchLabelKeys"):
        keys = term.get(field)
        if isinstance(keys, list):
            for index, key in enumerate(keys):
                if isinstance(key, str):
                    yield (*path, field, index), key, False


def _node_keys(pod_spec: Mapping[str, Any]) -> Iterator[tuple[FieldPath, str, bool]]:
    for key in mapping(pod_spec.get("nodeSelector")):
        yield ("nodeSelector", key), str(key), True
    node_affinity = mapping(mapping(pod_spec.get("affinity")).get("nodeAffinity"))
    base: FieldPath = ("affinity", "nodeAffinity")
    required = "requiredDuringSchedulingIgnoredDuringExecution"
    for index, term in mappings(mapping(node_affinity.get(required)).get("nodeSelectorTerms")):
        yield from _label_selector(term, (*base, required, "nodeSelectorTerms", index))
    preferred = "preferredDuringSchedulingIgnoredDuringExecution"
    for index, weighted in mappings(node_affinity.get(preferred)):
        yield from _label_selector(weighted.get("preference"),
                                   (*base, preferred, index, "preference"))


def _pod_keys(pod_spec: Mapping[str, Any]) -> Iterator[tuple[FieldPath, str, bool]]:
    affinity = mapping(pod_spec.get("affinity"))
    for kind in ("podAffinity", "podAntiAffinity"):
        terms = mapping(affinity.get(kind))
        required = "requiredDuringSchedulingIgnoredDuringExecution"
        for index, term in mappings(terms.get(required)):
            yield from _pod_affinity_term(term, ("affinity", kind, required, index))
        preferred = "preferredDuringSchedulingIgnoredDuringExecution"
        for index, weighted in mappings(terms.get(preferred)):
            yield from _pod_affinity_term(mapping(weighted.get("podAffinityTerm")),
                                          ("affinity", kind, preferred, index, "podAffinityTerm"))
    for index, constraint in mappings(pod_spec.get("topologySpreadConstraints")):
        yield from _pod_affinity_term(constraint, ("topologySpreadConstraints", index))


def tfjob_selectors(pod_spec: Any, carried: frozenset[str]) -> Iterator[TfjobSelector]:
    """Each selector key of a pod spec (a fragment or a rendered one) that is a TFJob pod label
    and that no pod of the job carries (`carried`: the labels of the job's pods)."""
    spec = mapping(pod_spec)
    for nodes, found in ((True, _node_keys(spec)), (False, _pod_keys(spec))):
        for path, label, on_key in found:
            if label in OPERATOR_LABELS or label in OLDER_LABELS:
                if not nodes and label in carried:
                    continue
                yield TfjobSelector(path, label, nodes, label in OPERATOR_LABELS, on_key)
