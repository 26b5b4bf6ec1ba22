"""Services a cluster would expose to the internet: a `LoadBalancer` with no source ranges that
no annotation makes internal.

TensorBoard has no authentication, and neither has anything else a training job serves; a
public load balancer in front of it shows the job's data to anyone. The compiler refuses the
obvious case; this judges what Kustomize rendered, where a user's own component may have made the
load balancer internal (or a patch may have turned a ClusterIP into a LoadBalancer).
"""

from __future__ import annotations

from collections.abc import Sequence

from tfcompile.compiler.rendering.manifests import KubernetesObject, object_reference

from .report import ObjectProblem

INTERNAL_ANNOTATIONS = {
    "service.beta.kubernetes.io/azure-load-balancer-internal": "true",
    "networking.gke.io/load-balancer-type": "internal",
    "cloud.google.com/load-balancer-type": "internal",
    "service.beta.kubernetes.io/aws-load-balancer-internal": "true",
    "service.beta.kubernetes.io/aws-load-balancer-scheme": "internal",
    "service.beta.kubernetes.io/oci-load-balancer-internal": "true",
    "service.kubernetes.io/ibm-load-balancer-cloud-provider-ip-type": "private",
}
"""Annotations of the major clouds' controllers that keep a load balancer on private addresses
(values compared without case)."""


def exposure_problems(objects: Sequence[KubernetesObject]) -> list[ObjectProblem]:
    problems = []
    for kubernetes_object in objects:
        if kubernetes_object.get("kind") != "Service":
            continue
        spec = kubernetes_object.get("spec") or {}
        if spec.get("type") != "LoadBalancer" or spec.get("loadBalancerSourceRanges"):
            continue
        annotations = (kubernetes_object.get("metadata") or {}).get("annotations") or {}
        if any(str(annotations.get(key, "")).lower() == value
               for key, value in INTERNAL_ANNOTATIONS.items()):
            continue
        problems.append(ObjectProblem(
            object_reference(kubernetes_object),
            "a LoadBalancer with no loadBalancerSourceRanges and no internal-load-balancer "
            "annotation is reachable from the internet: list the client CIDRs "
            "(tensorboard.loadBalancerSourceRanges), or add a component that makes it internal "
            "(the azure overlay does), or use ClusterIP and `kubectl port-forward`",
        ))
    return problems
