"""Selectors on a Kubeflow TFJob's pod labels in the rendered pods: none of the job's pods match.

The spec refuses them where a job's pod templates write them (`spec/tfjob_selectors.py`), but
a component or a hand-made kustomization may add an affinity or a topology spread constraint
after compilation, and the older, unprefixed labels (`job-name`, `replica-type`, …) may mean
another controller's pods, so the spec lets them pass. Here, judged as a cluster would get
them: a `training.kubeflow.org/…` key no rendered pod carries is an error (it can never select
the job's pods, nor a node); an unprefixed one a warning, naming the tfcompile label to use.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tfcompile.compiler.rendering.manifests import KubernetesObject, object_reference
from tfcompile.spec.problems import format_path
from tfcompile.spec.tfjob_selectors import tfjob_selectors

from .report import ObjectProblem, quoted

_TEMPLATE_KINDS = ("StatefulSet", "Deployment", "DaemonSet", "ReplicaSet", "Job")


def _template(item: KubernetesObject) -> Mapping[str, Any]:
    if item.get("kind") not in _TEMPLATE_KINDS:
        return {}
    template = (item.get("spec") or {}).get("template")
    return template if isinstance(template, Mapping) else {}


def tfjob_selector_findings(
    objects: Sequence[KubernetesObject],
) -> tuple[list[ObjectProblem], list[str]]:
    """Problems (operator labels) and warnings (older labels), one per selector key."""
    carried = frozenset(
        str(key)
        for item in objects
        for key in ((_template(item).get("metadata") or {}).get("labels") or {}))
    problems: list[ObjectProblem] = []
    warnings: list[str] = []
    for item in objects:
        pod_spec = _template(item).get("spec")
        for selector in tfjob_selectors(pod_spec, carried):
            field = format_path(("spec", "template", "spec", *selector.path))
            message = f"{quoted(field)}: {selector.message()}"
            if selector.certain:
                problems.append(ObjectProblem(object_reference(item), message))
            else:
                warnings.append(f"{object_reference(item)}: {message}")
    return problems, warnings
