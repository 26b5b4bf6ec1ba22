"""Rules of the Kubernetes-facing parts of a job: `podTemplate`, `scheduling`, `networkPolicy`
and how TensorBoard is exposed.

These fields speak Kubernetes' vocabulary, so their content is checked against Kubernetes' own
schemas (unknown fields are errors, located at the exact key), then against what tfcompile owns
and what a StatefulSet or the chosen gang scheduler needs.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from typing import Any

from .models import GangScheduler, JobSpec, ServiceType, TrainingJob
from .pod_template import (
    INGRESS_RULE_DEFINITION,
    TENSORBOARD_CONTAINER,
    mapping,
    mappings,
    owned_field_problems,
    schema_problems,
)
from .problems import FieldPath, Problem
from .tfjob_selectors import tfjob_selectors
from .volume_references import volume_name_problems

SHIPPED_WITHOUT_INTERNAL = {"gpu"}
"""Components that cannot make a load balancer internal."""

RESERVED_VOLUMES = ("script", "tfcompile-state", "tfcompile-home", "tfcompile-tmp", "shared",
                    "scratch")
"""Volume names tfcompile gives the pods of a role."""

TENSORBOARD_VOLUMES = ("shared", "tfcompile-home", "tfcompile-tmp")
"""Volume names tfcompile gives the TensorBoard pod."""


def check_kubernetes_fields(
    job: TrainingJob,
    reserved_environment: tuple[str, ...],
) -> Iterator[Problem]:
    """Every problem of the job's pod templates, scheduling, NetworkPolicy and TensorBoard."""
    spec = job.spec
    templates: list[tuple[FieldPath, dict[str, Any] | None]] = [
        (("spec", "podTemplate"), spec.pod_template)]
    templates.extend((("spec", "roles", name.value, "podTemplate"), role.pod_template)
                     for name, role in spec.roles.defined())
    if spec.tensorboard is not None:
        templates.append((("spec", "tensorboard", "podTemplate"), spec.tensorboard.pod_template))
    carried = _pod_labels(job, [fragment for _, fragment in templates])
    for path, fragment in templates:
        if fragment is None:
            continue
        found = list(schema_problems(path, fragment))
        yield from found
        if found:
            continue
        if path[1] == "tensorboard":
            yield from owned_field_problems(path, fragment, (), TENSORBOARD_VOLUMES,
                                            TENSORBOARD_CONTAINER)
        else:
            yield from owned_field_problems(path, fragment, reserved_environment,
                                            RESERVED_VOLUMES)
        yield from _volume_reference_problems(path, fragment)
        yield from _tfjob_selector_problems(path, fragment, carried)
    yield from _check_root(job)
    yield from _check_scheduling(spec)
    yield from _check_network_policy(spec)
    yield from _check_tensorboard_exposure(spec)


def _volume_reference_problems(path: FieldPath,
                               fragment: dict[str, Any]) -> Iterator[Problem]:
    """A claim, ConfigMap, Secret or other object a volume names is named, never a path (see
    `volume_references`): `run-local` makes a directory per claim name."""
    spec = mapping(fragment.get("spec"))
    for index, volume in mappings(spec.get("volumes")):
        for problem in volume_name_problems(volume):
            yield Problem((*path, "spec", "volumes", index, *problem.path), problem.message)


def _pod_labels(job: TrainingJob, fragments: list[dict[str, Any] | None]) -> frozenset[str]:
    """Every label key a pod of the job may carry from the spec: the job's labels and those
    its pod templates add."""
    keys = set(job.metadata.labels)
    for fragment in fragments:
        keys.update(str(key) for key in mapping(mapping(mapping(fragment).get("metadata")).get(
            "labels")))
    return frozenset(keys)


def _tfjob_selector_problems(path: FieldPath, fragment: dict[str, Any],
                             carried: frozenset[str]) -> Iterator[Problem]:
    """Selectors on the labels only Kubeflow's training operator sets (`tfjob_selectors`):
    they select none of the job's pods and no node. The older, unprefixed labels may mean other
    pods, so `validate` warns of those instead."""
    for selector in tfjob_selectors(mapping(fragment).get("spec"), carried):
        if selector.certain:
            yield Problem((*path, "spec", *selector.path), selector.message(),
                          key=selector.on_key)


def _contexts(path: FieldPath, fragment: dict[str, Any] | None) -> Iterator[
        tuple[str | None, FieldPath, dict[str, Any]]]:
    """Each `securityContext` of a fragment: (None for the pod's, else the container's name,
    its field path, the context)."""
    spec = mapping(mapping(fragment).get("spec"))
    if isinstance(spec.get("securityContext"), dict):
        yield None, (*path, "spec", "securityContext"), spec["securityContext"]
    for kind in ("initContainers", "containers"):
        for index, container in mappings(spec.get(kind)):
            context = container.get("securityContext")
            if isinstance(context, dict):
                yield (str(container.get("name")),
                       (*path, "spec", kind, index, "securityContext"), context)


def _check_root(job: TrainingJob) -> Iterator[Problem]:
    """User 0 under tfcompile's default `runAsNonRoot: true` never starts (the kubelet refuses
    it): a job that runs as root says `runAsNonRoot: false` too."""
    spec = job.spec
    reported: set[FieldPath] = set()
    for name, role in spec.roles.defined():
        contexts = [*_contexts(("spec", "podTemplate"), spec.pod_template),
                    *_contexts(("spec", "roles", name.value, "podTemplate"), role.pod_template)]
        pod: dict[str, Any] = {}
        for owner, _, context in contexts:
            if owner is None:
                pod.update(context)
        for owner, path, context in contexts:
            if context.get("runAsUser") != 0 or (*path, "runAsUser") in reported:
                continue
            if owner is None:
                non_root = pod.get("runAsNonRoot", True)
            else:
                own = [c for o, _, c in contexts if o == owner and "runAsNonRoot" in c]
                non_root = own[-1]["runAsNonRoot"] if own else pod.get("runAsNonRoot", True)
            if non_root is not False:
                reported.add((*path, "runAsUser"))
                yield Problem((*path, "runAsUser"),
                              "user 0 under runAsNonRoot: true (tfcompile's default) never "
                              "starts: add runAsNonRoot: false next to it to run as root")


def _check_scheduling(spec: JobSpec) -> Iterator[Problem]:
    scheduling = spec.scheduling
    where = ("spec", "scheduling")
    if scheduling.topology is not None and scheduling.gang is not GangScheduler.KUEUE:
        yield Problem((*where, "topology"), "topology-aware scheduling is Kueue's: set "
                      "scheduling.gang: kueue (and its queue), or remove topology")
    if scheduling.gang is None:
        if scheduling.queue is not None:
            yield Problem((*where, "queue"), "a queue belongs to a gang scheduler: set "
                          "scheduling.gang (volcano or kueue) too")
        return
    if scheduling.gang is GangScheduler.KUEUE and scheduling.queue is None:
        yield Problem(where, "Kueue admits a job through a LocalQueue: set scheduling.queue to "
                      "the LocalQueue's name in the job's namespace")
    if scheduling.gang is GangScheduler.COSCHEDULING and scheduling.queue is not None:
        yield Problem((*where, "queue"), "the coscheduling plugin has no queues: remove "
                      "scheduling.queue, or use gang: volcano or kueue")


def _check_network_policy(spec: JobSpec) -> Iterator[Problem]:
    settings = spec.network_policy_settings()
    if settings is None:
        return
    for index, rule in enumerate(settings.ingress):
        yield from schema_problems(("spec", "networkPolicy", "ingress", index), rule,
                                   INGRESS_RULE_DEFINITION)


def _check_tensorboard_exposure(spec: JobSpec) -> Iterator[Problem]:
    tensorboard = spec.tensorboard
    if tensorboard is None:
        return
    where = ("spec", "tensorboard")
    for index, cidr in enumerate(tensorboard.load_balancer_source_ranges):
        try:
            ipaddress.ip_network(cidr, strict=False)
        except ValueError:
            yield Problem((*where, "loadBalancerSourceRanges", index),
                          "not a CIDR: give an address range such as 10.0.0.0/8")
    if tensorboard.service_type is not ServiceType.LOAD_BALANCER:
        if tensorboard.load_balancer_source_ranges:
            yield Problem((*where, "loadBalancerSourceRanges"),
                          "only a LoadBalancer Service has source ranges: remove them or set "
                          "serviceType: LoadBalancer")
        return
    if tensorboard.load_balancer_source_ranges or set(spec.overlays) - SHIPPED_WITHOUT_INTERNAL:
        # azure makes it internal; a component of the user's own may too, which `validate`
        # judges on the rendered Service.
        return
    yield Problem(
        (*where, "serviceType"),
        "a LoadBalancer TensorBoard with no source ranges is open to the internet (TensorBoard "
        "has no authentication): list the client CIDRs in tensorboard.loadBalancerSourceRanges, "
        "name a component that makes the load balancer internal (the azure overlay does), or "
        "use ClusterIP and `kubectl port-forward`",
    )
