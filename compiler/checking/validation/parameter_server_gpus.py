"""GPUs asked for on a parameter server: a warning, since they would stay idle.

Under ParameterServerStrategy (and TensorFlow 1's between-graph replication) a parameter server
holds the variables and applies the updates the workers send; the computation runs on the
workers (and the chief). A GPU on a `ps` pod is taken from the node pool, billed, and idle, and
it keeps the pod waiting for a GPU node. It may be meant (a very large embedding table kept in
GPU memory), so it is a warning, not an error. Judged on the rendered StatefulSets, since a
component may set GPUs too; `roles.ps.gpus` is where the spec asks for them.
"""

from __future__ import annotations

from collections.abc import Sequence

from tfcompile.compiler.objects.labels import ROLE_LABEL
from tfcompile.compiler.rendering.manifests import KubernetesObject, object_reference

from .report import quoted

PARAMETER_SERVER_ROLE = "ps"
"""`RoleName.PS` of the spec, written out: `validate` does not import the spec's models (0.13 s
of its start); tests/test_validation.py holds the two equal."""


def _gpu_resource(name: str) -> bool:
    """`nvidia.com/gpu`, `amd.com/gpu`, a MIG slice (`nvidia.com/mig-1g.5gb`)."""
    return name.endswith("/gpu") or name.startswith("nvidia.com/mig-")


def parameter_server_gpu_warnings(objects: Sequence[KubernetesObject]) -> list[str]:
    """One warning per container of a `ps` role's pods that asks for GPUs."""
    warnings: list[str] = []
    for item in objects:
        if item.get("kind") != "StatefulSet":
            continue
        template = (item.get("spec") or {}).get("template") or {}
        labels = (template.get("metadata") or {}).get("labels") or {}
        if labels.get(ROLE_LABEL) != PARAMETER_SERVER_ROLE:
            continue
        for container in (template.get("spec") or {}).get("containers") or []:
            resources = container.get("resources") or {}
            asked = {str(name): value
                     for kind in ("limits", "requests")
                     for name, value in (resources.get(kind) or {}).items()
                     if _gpu_resource(str(name)) and str(value) not in ("0", "")}
            for name, value in sorted(asked.items()):
                warnings.append(
                    f"{object_reference(item)}: container {quoted(container.get('name'))} asks "
                    f"for {quoted(value)} {quoted(name)} (spec.roles.ps.gpus in the job's "
                    "spec): parameter servers hold and update the variables and compute "
                    "nothing, so the GPU stays idle and keeps the pod waiting for a GPU node; "
                    "remove gpus from roles.ps and give them to the workers (or the chief)")
    return warnings
